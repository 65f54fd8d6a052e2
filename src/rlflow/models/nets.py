"""Torch networks: an MLP, the Nature DQN CNN, and the actor-critic model policies use.

Initialisation follows CleanRL's PPO: orthogonal weights with gain ``sqrt(2)`` in hidden layers,
``0.01`` for the policy head (near-uniform first actions) and ``1.0`` for the value head; biases
are zero.

:func:`build_model` picks the network from the spaces: a 3-D ``Box`` observation is an image and
gets :class:`NatureCNN`; a ``Box`` of any other rank is flattened into an :class:`MLP`; a
``Discrete`` observation is one-hot encoded first. Images travel as uint8 and are divided by 255
inside the model, so rollout buffers and batches stay four times smaller.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlflow.errors import ConfigError
from rlflow.models.distributions import DiagGaussian, dist_class_for

__all__ = [
    "ACTIVATIONS",
    "MLP",
    "ActorCritic",
    "NatureCNN",
    "build_model",
    "layer_init",
]

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "elu": nn.ELU,
}
"""Activation names accepted by :class:`MLP` and :func:`build_model`."""

_HIDDEN_GAIN = math.sqrt(2.0)
_POLICY_GAIN = 0.01
_VALUE_GAIN = 1.0
# Smallest side the three Nature convolutions (8/4, 4/2, 3/1) accept.
_MIN_IMAGE_SIDE = 36


def layer_init(layer: nn.Linear | nn.Conv2d, gain: float) -> nn.Linear | nn.Conv2d:
    """Initialise ``layer`` in place (orthogonal weights with ``gain``, zero bias); return it."""
    nn.init.orthogonal_(layer.weight, gain)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)
    return layer


def _activation(name: str) -> type[nn.Module]:
    if name not in ACTIVATIONS:
        raise ConfigError(
            f"model.activation={name!r} is not supported; use one of {sorted(ACTIVATIONS)}."
        )
    return ACTIVATIONS[name]


class MLP(nn.Module):
    """Fully connected layers ``in -> hidden... [-> out]`` with an activation after each hidden.

    Args:
        in_features: width of the input.
        hidden: widths of the hidden layers; may be empty.
        activation: a key of :data:`ACTIVATIONS`.
        out_features: width of a final linear layer (no activation after it); ``None`` ends
            with the last hidden layer.
        out_gain: orthogonal gain of the final layer (0.01 for a policy head, 1.0 for a value).
    """

    def __init__(
        self,
        in_features: int,
        hidden: tuple[int, ...],
        *,
        activation: str = "tanh",
        out_features: int | None = None,
        out_gain: float = 1.0,
    ) -> None:
        """Build and initialise the layers; raise `ConfigError` on a bad width or activation."""
        super().__init__()
        act = _activation(activation)
        if any(int(h) < 1 for h in hidden):
            raise ConfigError(f"model.hidden={hidden!r} must hold positive layer widths.")
        layers: list[nn.Module] = []
        width = in_features
        for size in hidden:
            layers += [layer_init(nn.Linear(width, int(size)), _HIDDEN_GAIN), act()]
            width = int(size)
        if out_features is not None:
            layers.append(layer_init(nn.Linear(width, out_features), out_gain))
            width = out_features
        self.net = nn.Sequential(*layers)
        self.out_features = width
        """Width of the output."""
        self._layers = tuple(layers)  # plain references: no Module lookups in forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map ``[B, in_features]`` to ``[B, out_features]``.

        The layers' own ``forward`` is called directly (the same kernels, so the same numbers,
        without ``nn.Module.__call__``'s hook machinery: a large share of a small MLP's time).
        """
        for layer in self._layers:
            x = layer.forward(x)
        return x


class NatureCNN(nn.Module):
    """The Nature DQN torso (Mnih et al., 2015): three convolutions and a 512-unit layer.

    Input is ``[B, H, W, C]`` when the last dimension of ``obs_shape`` is smaller than the first
    (e.g. ``(84, 84, 4)``), else ``[B, C, H, W]`` (e.g. ``(4, 84, 84)``). Pixel values in
    ``[0, 255]`` (usually uint8) are divided by 255 here. Output is ``[B, 512]`` after a ReLU.
    """

    def __init__(self, obs_shape: tuple[int, ...]) -> None:
        """Build for images of ``obs_shape``; raise `ConfigError` if not 3-D or too small."""
        super().__init__()
        if len(obs_shape) != 3:
            raise ConfigError(f"NatureCNN needs a 3-D image shape, got {obs_shape!r}.")
        self.channels_last = obs_shape[-1] < obs_shape[0]
        """Whether inputs are HWC (permuted to CHW inside :meth:`forward`)."""
        c, h, w = (obs_shape[2], *obs_shape[:2]) if self.channels_last else obs_shape
        if min(h, w) < _MIN_IMAGE_SIDE:
            raise ConfigError(
                f"NatureCNN needs images at least {_MIN_IMAGE_SIDE}x{_MIN_IMAGE_SIDE}, got "
                f"observation shape {obs_shape!r}; resize the frames (84x84 is usual)."
            )
        self.convs = nn.Sequential(
            layer_init(nn.Conv2d(c, 32, 8, stride=4), _HIDDEN_GAIN),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2), _HIDDEN_GAIN),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1), _HIDDEN_GAIN),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = int(self.convs(torch.zeros(1, c, h, w)).shape[1])
        self.fc = nn.Sequential(layer_init(nn.Linear(flat, 512), _HIDDEN_GAIN), nn.ReLU())
        self.out_features = 512
        """Width of the output."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map a batch of images to ``[B, 512]`` features."""
        x = x.float() / 255.0
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        out: torch.Tensor = self.fc(self.convs(x))
        return out


class ActorCritic(nn.Module):
    """Policy and value network over one observation and action space.

    ``forward(obs)`` returns ``(dist_inputs [B, input_dim], value [B])``; ``dist_inputs`` feed
    the class :func:`~rlflow.models.distributions.dist_class_for` gives. For a ``Box`` action
    space the model outputs the mean and appends a state-independent ``log_std`` parameter
    (initialised to 0). Build it with :func:`build_model`.

    Args:
        obs_space: observation space (``Box`` or ``Discrete``).
        action_space: action space (``Discrete``, ``MultiDiscrete`` or 1-D ``Box``).
        hidden: MLP hidden widths; ignored for images (the CNN's 512 units feed the heads).
        activation: a key of :data:`ACTIVATIONS` for the MLP.
        shared: one MLP trunk for both heads instead of separate policy and value MLPs.
            Images always share the CNN.
    """

    def __init__(
        self,
        obs_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        hidden: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        shared: bool = False,
    ) -> None:
        """Build the networks; raise `ConfigError` naming an unsupported space."""
        super().__init__()
        dist_class = dist_class_for(action_space)
        dist_dim = dist_class.required_input_dim(action_space)
        gaussian = dist_class is DiagGaussian
        head_dim = dist_dim // 2 if gaussian else dist_dim
        self._one_hot = 0
        if isinstance(obs_space, gym.spaces.Discrete):
            self._one_hot = int(obs_space.n)
            in_features = self._one_hot
        elif isinstance(obs_space, gym.spaces.Box):
            in_features = int(np.prod(obs_space.shape))
        else:
            raise ConfigError(
                f"Unsupported observation space {obs_space!r}: rlflow models take Box or "
                "Discrete observations. Flatten the env's observation space."
            )
        self.is_image = isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 3
        """Whether observations go through :class:`NatureCNN`."""
        self.trunk: nn.Module | None = None
        if self.is_image:
            self.trunk = NatureCNN(tuple(obs_space.shape))  # type: ignore[arg-type]
            out = 512
            self.pi: nn.Module = layer_init(nn.Linear(out, head_dim), _POLICY_GAIN)
            self.vf: nn.Module = layer_init(nn.Linear(out, 1), _VALUE_GAIN)
        elif shared:
            trunk = MLP(in_features, hidden, activation=activation)
            self.trunk = trunk
            self.pi = layer_init(nn.Linear(trunk.out_features, head_dim), _POLICY_GAIN)
            self.vf = layer_init(nn.Linear(trunk.out_features, 1), _VALUE_GAIN)
        else:
            kw: dict[str, Any] = {"activation": activation}
            self.pi = MLP(in_features, hidden, out_features=head_dim, out_gain=_POLICY_GAIN, **kw)
            self.vf = MLP(in_features, hidden, out_features=1, out_gain=_VALUE_GAIN, **kw)
        self.log_std = nn.Parameter(torch.zeros(head_dim)) if gaussian else None

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        if self.is_image:
            return obs
        if self._one_hot:
            return F.one_hot(obs.long().reshape(-1), self._one_hot).float()
        return obs.reshape(obs.shape[0], -1).float()

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(dist_inputs, value)`` for a batch of raw observations ``[B, *obs_shape]``."""
        x = self._features(obs)
        if self.trunk is not None:
            x = self.trunk.forward(x)
        logits: torch.Tensor = self.pi.forward(x)
        if self.log_std is not None:
            logits = torch.cat([logits, self.log_std.expand_as(logits)], dim=-1)
        value: torch.Tensor = self.vf.forward(x)
        return logits, value.squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Return the value estimate ``[B]`` only (skips the policy head when not shared)."""
        x = self._features(obs)
        if self.trunk is not None:
            x = self.trunk.forward(x)
        value: torch.Tensor = self.vf.forward(x)
        return value.squeeze(-1)


def build_model(
    obs_space: gym.Space[Any],
    action_space: gym.Space[Any],
    *,
    hidden: tuple[int, ...] = (64, 64),
    activation: str = "tanh",
    shared: bool = False,
) -> ActorCritic:
    """Build the :class:`ActorCritic` for the given spaces; arguments as in that class.

    Raises :class:`ConfigError` naming the space when either space is unsupported, and naming
    the field when ``hidden`` or ``activation`` is invalid.
    """
    return ActorCritic(
        obs_space,
        action_space,
        hidden=tuple(int(h) for h in hidden),
        activation=activation,
        shared=shared,
    )

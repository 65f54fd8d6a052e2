"""`FlatPolicy`: a deterministic MLP (or linear map) whose parameters are one flat vector.

The model (:class:`FlatMLP`) maps an observation to action logits (Discrete) or action means
(Box) through ``model.hidden`` layers of ``model.activation``; with ``hidden=()`` it is a
linear map (ARS's). Its parameters, in ``model.parameters()`` order (each layer's weight
``[out, in]`` row-major, then its bias), are the vector ``theta`` that ES and ARS perturb.
Workers act with many such vectors at once in numpy (:func:`batched_forward`: one
``einsum`` per layer for all perturbations of a request), which the torch model reproduces
exactly; the torch model serves `rlflow.Trainer.evaluate` and ``compute_actions``.

The policy also keeps what the driver's update needs between iterations: the optimizer's
state (:class:`Adam`, ES; plain SGD keeps none), saved in checkpoints with the weights.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rlflow.algorithms.perturbation.config import PerturbationConfig
from rlflow.algorithms.perturbation.flat import Adam
from rlflow.errors import ConfigError, PlanError
from rlflow.models.actors import ActorCriticActor, ActorExport
from rlflow.models.nets import ACTIVATIONS
from rlflow.policy import TorchPolicy

__all__ = ["FlatMLP", "FlatPolicy"]

Array = npt.NDArray[Any]


class FlatMLP(nn.Module):
    """``obs -> outputs``: ``len(hidden)`` layers of ``activation``, then a linear output.

    ``forward`` returns ``(dist_inputs, values)`` as the policy base expects: for a Box action
    space the inputs of a diagonal Gaussian whose mean is the output and whose log-std is 0
    (acting without exploration takes the mean), for Discrete the logits; values are zeros
    (no critic).
    """

    def __init__(
        self, in_dim: int, out_dim: int, hidden: tuple[int, ...], activation: str, *, box: bool
    ) -> None:
        """Build the layers (``box``: append a zero log-std to the outputs)."""
        super().__init__()
        sizes = [in_dim, *hidden, out_dim]
        self.linears = [nn.Linear(a, b) for a, b in itertools.pairwise(sizes)]
        self.layers = nn.ModuleList(self.linears)
        self.activation = activation
        self.act = ACTIVATIONS[activation]()
        self.box = box

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """``[(out, in), ...]`` of each layer, in order."""
        return [(layer.out_features, layer.in_features) for layer in self.linears]

    def outputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The network's outputs ``[B, out_dim]``."""
        h = obs.float()
        for k, layer in enumerate(self.linears):
            h = layer(h)
            if k < len(self.linears) - 1:
                h = self.act(h)
        return h

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(dist_inputs, values)``; see the class docstring."""
        out = self.outputs(obs)
        if self.box:
            out = torch.cat([out, torch.zeros_like(out)], dim=-1)
        return out, torch.zeros(out.shape[0], device=out.device)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Zeros: no critic."""
        return torch.zeros(obs.shape[0], device=obs.device)


class FlatPolicy(TorchPolicy):
    """A deterministic policy of flat parameters for ES and ARS; see the module docstring.

    Takes 1-D Box observations and Discrete or 1-D Box actions (the action space is checked
    when the learner's worker builds it, before any actor starts). ``zero_init`` (ARS) starts
    from all-zero parameters, as Mania et al. do; else torch's default initialisation scaled
    down in the output layer (Salimans et al.'s normalized columns, small outputs at first).
    """

    config_class: ClassVar[type[PerturbationConfig]] = PerturbationConfig
    observation_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Box,)
    action_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Discrete, gym.spaces.Box)
    zero_init: ClassVar[bool] = False
    """Start from theta = 0 (ARS)."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: PerturbationConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build the model and the driver's optimizer of theta (`make_flat_optimizer`)."""
        name = type(self).__name__
        if len(getattr(observation_space, "shape", ()) or ()) != 1:
            raise ConfigError(
                f"{name} takes 1-D Box observations, not {observation_space} (images need a "
                "gradient-trained network: use PPO)"
            )
        if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) != 1:
            raise ConfigError(f"{name} takes 1-D Box action spaces, not {action_space}")
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        self.optimizer: Adam | None = self.make_flat_optimizer()
        """The driver's optimizer of theta (its state is checkpointed); None: plain SGD."""

    def make_flat_optimizer(self) -> Adam | None:
        """The optimizer of theta (a hook: ES's Adam); None here: plain SGD (ARS)."""
        return None

    def make_model(self) -> nn.Module:
        """The :class:`FlatMLP` of ``model.hidden`` and ``model.activation``."""
        space: Any = self.action_space
        box = isinstance(space, gym.spaces.Box)
        out = int(space.shape[0]) if box else int(space.n)
        obs_shape: Any = self.observation_space.shape
        model = FlatMLP(
            int(obs_shape[0]),
            out,
            tuple(self.config.model.hidden),
            self.config.model.activation,
            box=box,
        )
        with torch.no_grad():
            if self.zero_init:
                for p in model.parameters():
                    p.zero_()
            else:
                model.linears[-1].weight.mul_(0.01)
                model.linears[-1].bias.zero_()
        return model

    @property
    def flat_model(self) -> FlatMLP:
        """The model, typed."""
        model = self.model
        assert isinstance(model, FlatMLP)
        return model

    def flat_weights(self) -> npt.NDArray[np.float32]:
        """``theta``: the parameters as one float32 vector."""
        with torch.no_grad():
            vec = nn.utils.parameters_to_vector(self.model.parameters())
        return vec.cpu().numpy().astype(np.float32)

    def set_flat_weights(self, theta: npt.ArrayLike) -> None:
        """Load ``theta`` (as :meth:`flat_weights` gives it)."""
        vec = torch.as_tensor(np.asarray(theta, dtype=np.float32))
        if vec.numel() != self.num_flat:
            raise ConfigError(
                f"{type(self).__name__}.set_flat_weights: {vec.numel()} values for a model of "
                f"{self.num_flat} parameters"
            )
        with torch.no_grad():
            nn.utils.vector_to_parameters(vec.to(self.device), self.model.parameters())

    @property
    def num_flat(self) -> int:
        """The length of theta."""
        return sum(p.numel() for p in self.model.parameters())

    def act(self, outputs: Array) -> Array:
        """Env actions from :func:`batched_forward` outputs ``[P, out]``: argmax (Discrete), or
        the outputs clipped to the bounds (Box)."""
        space = self.action_space
        if isinstance(space, gym.spaces.Box):
            return np.asarray(np.clip(outputs, space.low, space.high))
        return np.asarray(np.argmax(outputs, axis=1))

    def export_model(self) -> ActorExport:
        """The model as an `ActorCriticActor` (`rlflow.export`): its layers are the actor's
        policy MLP (``shared=False``), the value MLP and a Box action's log-std zeros; the
        exported actor's mode is this policy's action."""
        model = self.flat_model
        options: dict[str, Any] = {
            "hidden": [out for out, _ in model.shapes[:-1]],
            "activation": model.activation,
            "shared": False,
        }
        probe = ActorCriticActor(self.observation_space, self.action_space, **options)
        weights = {k: np.zeros_like(v.numpy()) for k, v in probe.state_dict().items()}
        for k, layer in enumerate(model.linears):
            weights[f"pi.net.{2 * k}.weight"] = layer.weight.detach().cpu().numpy().copy()
            weights[f"pi.net.{2 * k}.bias"] = layer.bias.detach().cpu().numpy().copy()
        return ActorExport(ActorCriticActor, options, weights)

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Not used: ES and ARS estimate their update from returns, not from a loss."""
        raise PlanError(f"{type(self).__name__} learns from returns of perturbations, not a loss")

    def get_state(self) -> dict[str, Any]:
        """The base's state plus the optimizer's."""
        state = super().get_state()
        state["flat_optimizer"] = None if self.optimizer is None else self.optimizer.get_state()
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state`."""
        super().set_state(state)
        opt = state.get("flat_optimizer")
        if opt is not None and self.optimizer is not None:
            self.optimizer.set_state(opt)

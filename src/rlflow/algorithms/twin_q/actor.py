"""`TanhActor`: the actor of SAC's and TD3's policies as an exportable network.

The actor is an MLP whose output goes through ``tanh`` into unit actions ``u`` in [-1, 1],
which map to the Box as ``mid + half * u`` (`rlflow.algorithms.twin_q.policy`). TD3's output
is ``mu``; SAC's is a mean and a log-std per dimension (greedy: ``tanh(mean)``). Exploring
draws with the loaded policy's generator: SAC samples the squashed Gaussian, TD3 adds Gaussian
noise of ``noise`` (clipped to [-1, 1] in unit space). `tanh_actor_export` is what both
policies' ``export_model`` return.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlflow.errors import ConfigError
from rlflow.models import MLP
from rlflow.models.actors import ActorExport, ExportableActor

__all__ = ["TanhActor", "tanh_actor_export"]


class TanhActor(MLP, ExportableActor):
    """A SAC or TD3 actor acting on its own; same parameter names as the policy's actor MLP.

    Options: ``hidden`` and ``activation`` (the policy's ``model``), ``gaussian`` (SAC: the
    output is mean and log-std), ``log_std_bounds`` (SAC's clamp of the log-std) and ``noise``
    (TD3's exploration noise, in unit space).
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        hidden: tuple[int, ...] = (256, 256),
        activation: str = "relu",
        gaussian: bool = False,
        log_std_bounds: tuple[float, float] = (-20.0, 2.0),
        noise: float = 0.0,
    ) -> None:
        """Build the MLP for a 1-D Box action space; weights are loaded afterwards."""
        if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
            raise ConfigError(f"TanhActor: action_space={action_space!r} must be a 1-D Box")
        act_dim = int(action_space.shape[0])
        obs_dim = int(np.prod(observation_space.shape or (1,)))
        hidden = tuple(int(h) for h in hidden)
        out = 2 * act_dim if gaussian else act_dim
        super().__init__(obs_dim, hidden, activation=activation, out_features=out)
        low = np.asarray(action_space.low, dtype=np.float32)
        high = np.asarray(action_space.high, dtype=np.float32)
        self._mid = torch.as_tensor((high + low) / 2.0)
        self._half = torch.as_tensor((high - low) / 2.0)
        self.gaussian, self.noise = bool(gaussian), float(noise)
        self.log_std_bounds = (float(log_std_bounds[0]), float(log_std_bounds[1]))

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The network's outputs before squashing: SAC's mean and log-std, TD3's ``mu``."""
        out: torch.Tensor = self.forward(obs.reshape(obs.shape[0], -1).float())
        return out

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """``mid + half * tanh(...)``: the mean's (SAC) or ``mu``'s (TD3) action, or a draw."""
        out = self.forward(obs.reshape(obs.shape[0], -1).float()).cpu()
        if self.gaussian:
            mean, log_std = out.chunk(2, dim=1)
            if explore:
                log_std = log_std.clamp(*self.log_std_bounds)
                mean = mean + log_std.exp() * torch.randn(mean.shape, generator=generator)
            unit = torch.tanh(mean)
        else:
            unit = torch.tanh(out)
            if explore and self.noise > 0:
                draw = torch.randn(unit.shape, generator=generator)
                unit = (unit + self.noise * draw).clamp(-1.0, 1.0)
        return self._mid + self._half * unit


def tanh_actor_export(policy: Any, **options: Any) -> ActorExport:
    """The export of a SAC or TD3 ``policy``: a `TanhActor` with the policy's model options and
    ``options`` (``gaussian``, ``log_std_bounds``, ``noise``), and its actor's weights."""
    model_cfg = policy.config.model
    base = {"hidden": list(model_cfg.hidden), "activation": model_cfg.activation}
    return ActorExport(TanhActor, {**base, **options}, policy.get_weights())

"""`SACPolicy`: soft actor-critic with a tanh-Gaussian actor and automatic entropy tuning.

Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (2018), on
`rlflow.algorithms.twin_q.policy.TwinQPolicy` (twin critics, Polyak targets, n-step replay). With
``x = mean(s) + std(s) * eps`` (eps ~ N(0, I)), the unit action is ``u = tanh(x)``, the env
action ``mid + half * u``, and its log-density (:func:`squashed_logp`)::

    log pi(a|s) = log N(x; mean, std) - sum_j log(1 - tanh(x_j)^2) - sum_j log(half_j)

    next_value  = min_i Q_target_i(s', a') - alpha * log pi(a'|s')     (a' ~ pi(.|s'))
    actor_loss  = mean(alpha * log pi(a|s) - min_i Q_i(s, a))          (a ~ pi(.|s), reparam.)
    alpha_loss  = -mean(log_alpha * (log pi(a|s) + target_entropy))    (log pi detached)

Acting samples ``a`` (the mean's action with ``explore=False``); the log-std is clamped to
[-20, 2]. Reads `SACConfig`'s ``initial_alpha``, ``target_entropy`` and ``alpha_lr`` besides
`TwinQConfig`'s fields.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from rlflow.algorithms.sac.config import SACConfig
from rlflow.algorithms.twin_q.actor import tanh_actor_export
from rlflow.algorithms.twin_q.policy import TwinQPolicy
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import ACTION_DIST_INPUTS, LOGP, VF_PREDS, SampleBatch
from rlflow.models.actors import ActorExport
from rlflow.models.memory import RecurrentInputs
from rlflow.replay import replay_transitions

__all__ = ["SACPolicy", "squashed_logp"]

Array = npt.NDArray[Any]

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


def squashed_logp(x: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """``log pi(tanh(x))`` ``[B]`` of a diagonal Gaussian ``x`` squashed by tanh, in unit
    action space (subtract ``sum log(half)`` for env units).

    ``log(1 - tanh(x)^2)`` is computed as ``2 (log 2 - x - softplus(-2x))``, exact and stable
    for large ``|x|``.

    >>> zero = torch.zeros(1, 1)
    >>> round(squashed_logp(zero, zero, zero).item(), 4)  # log N(0; 0, 1) = -log(2 pi) / 2
    -0.9189
    """
    log_normal = -0.5 * ((x - mean) / log_std.exp()).pow(2) - log_std - 0.5 * math.log(2 * math.pi)
    log_jacobian = 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))
    return (log_normal - log_jacobian).sum(dim=1)


class SACPolicy(TwinQPolicy):
    """SAC's policy (module docstring): acting, soft targets, actor and alpha losses."""

    config: SACConfig
    config_class: ClassVar[type[AlgorithmConfig]] = SACConfig
    algo_name: ClassVar[str] = "SAC"
    actor_out_factor: ClassVar[int] = 2

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: SACConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build the networks and ``log_alpha``; fix the target entropy."""
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        auto = config.target_entropy == "auto"
        self.target_entropy = -float(self.act_dim) if auto else float(config.target_entropy)
        """The entropy the temperature's loss steers towards (``target_entropy``; "auto":
        minus the action's dimensions)."""
        self._log_half = float(torch.log(self._half).sum())

    def initial_alpha(self) -> float | None:
        """``initial_alpha``: SAC's model learns ``log_alpha``."""
        return float(self.config.initial_alpha)

    def param_groups(self) -> list[dict[str, Any]]:
        """Twin-Q's groups, and ``log_alpha`` at ``alpha_lr``."""
        return [*super().param_groups(), {"params": [self.log_alpha], "lr": self.config.alpha_lr}]

    @property
    def log_alpha(self) -> torch.nn.Parameter:
        """The learned log entropy temperature."""
        log_alpha = self.net.log_alpha
        assert log_alpha is not None  # built with initial_alpha
        return log_alpha

    @property
    def alpha(self) -> float:
        """The current entropy temperature ``exp(log_alpha)``."""
        return float(self.log_alpha.detach().exp())

    def sample(
        self, obs: torch.Tensor, *, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(unit action [B, A], log pi in unit space [B], actor output [B, 2A])`` at flat
        ``obs``, reparameterized (gradients flow into the actor)."""
        out = self.net.actor(obs)
        mean, log_std = out.chunk(2, dim=1)
        log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
        x = mean + log_std.exp() * self.randn(tuple(mean.shape)) if explore else mean
        return torch.tanh(x), squashed_logp(x, mean, log_std), out

    def compute_actions(
        self, obs: npt.ArrayLike, *, explore: bool = True, memory: RecurrentInputs | None = None
    ) -> tuple[Array, dict[str, Array]]:
        """Squashed Gaussian actions in the Box (the mean's with ``explore=False``).

        Extra columns: `LOGP` (log-density of the env action), `ACTION_DIST_INPUTS` (mean and
        unclamped log-std), `VF_PREDS` = 0.
        """
        with torch.no_grad():
            unit, logp, out = self.sample(self.flat_obs(self.obs_to_tensor(obs)), explore=explore)
            actions = self.to_env(unit).cpu().numpy()
        extra = {
            LOGP: (logp - self._log_half).cpu().numpy(),
            VF_PREDS: np.zeros(len(actions), dtype=np.float32),
            ACTION_DIST_INPUTS: out.cpu().numpy(),
        }
        return actions, extra

    def export_model(self) -> ActorExport:
        """The actor as a `TanhActor` (`rlflow.export`): greedy ``tanh(mean)`` in the Box;
        exploring samples the squashed Gaussian."""
        return tanh_actor_export(self, gaussian=True, log_std_bounds=[LOG_STD_MIN, LOG_STD_MAX])

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """n-step transitions of one episode fragment (`rlflow.replay.replay_transitions`)."""
        config = self.config
        return replay_transitions(batch, n=config.n_step, gamma=config.gamma, owner="SACPolicy")

    def next_value(self, next_obs: torch.Tensor) -> torch.Tensor:
        """``min_i Q_target_i(s', a') - alpha * log pi(a'|s')``, ``a'`` sampled."""
        unit, logp, _ = self.sample(next_obs)
        q_next = self.q_values(self.target_model, next_obs, unit).min(dim=0).values
        return q_next - self.alpha * logp

    def actor_loss(self, obs: torch.Tensor) -> tuple[torch.Tensor | None, dict[str, Any]]:
        """The actor's loss plus the alpha loss (module docstring)."""
        unit, logp, _ = self.sample(obs)
        actor = (self.log_alpha.exp().detach() * logp - self.q_detached(obs, unit)).mean()
        return self.with_alpha_loss(actor, logp)

    def with_alpha_loss(
        self, actor: torch.Tensor, logp: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """``actor`` plus the alpha loss at the sampled actions' ``logp``, and the stats."""
        alpha = self.log_alpha.exp()
        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        stats = {
            "actor_loss": actor,
            "alpha_loss": alpha_loss,
            "alpha": alpha,
            "entropy": -logp.mean(),
        }
        return actor + alpha_loss, stats

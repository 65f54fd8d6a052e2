"""`TD3Policy`: twin delayed DDPG: a deterministic actor, twin critics, target smoothing.

Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic Methods" (ICML 2018),
Algorithm 1, on `rlflow.algorithms.twin_q.policy.TwinQPolicy` (twin critics, Polyak targets, n-step
replay). The actor's unit action is ``mu(s) = tanh(actor(s))``; in unit space::

    acting      a  = clip(mu(s) + N(0, exploration_noise), -1, 1)        (mu(s) greedy)
    next_value     = min_i Q_target_i(s', clip(mu_target(s') + eps, -1, 1)),
                     eps = clip(N(0, target_noise), -target_noise_clip, target_noise_clip)
    actor_loss     = -mean(Q_1(s, mu(s)))      every policy_delay-th update only

and the targets (actor and critics) move by Polyak averaging only after an update that
trained the actor. Reads `TD3Config`'s ``policy_delay``, ``target_noise``,
``target_noise_clip`` and ``exploration_noise`` besides `TwinQConfig`'s fields.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch

from rlflow.algorithms.td3.config import TD3Config
from rlflow.algorithms.twin_q.actor import tanh_actor_export
from rlflow.algorithms.twin_q.policy import TwinQPolicy
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import ACTION_DIST_INPUTS, LOGP, VF_PREDS, SampleBatch
from rlflow.models.actors import ActorExport
from rlflow.models.memory import RecurrentInputs
from rlflow.replay import replay_transitions

__all__ = ["TD3Policy"]

Array = npt.NDArray[Any]


class TD3Policy(TwinQPolicy):
    """TD3's policy (module docstring): noisy deterministic acting, smoothed targets, delayed
    actor and target updates."""

    config: TD3Config
    config_class: ClassVar[type[AlgorithmConfig]] = TD3Config
    algo_name: ClassVar[str] = "TD3"

    def mu(self, actor: torch.nn.Module, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic unit action ``tanh(actor(obs))`` ``[B, A]``."""
        return torch.tanh(actor(obs))

    def compute_actions(
        self, obs: npt.ArrayLike, *, explore: bool = True, memory: RecurrentInputs | None = None
    ) -> tuple[Array, dict[str, Array]]:
        """``mu(s)`` plus Gaussian noise, clipped to the Box (``mu(s)`` with ``explore=False``).

        Extra columns: `ACTION_DIST_INPUTS` = ``mu(s)`` in unit space, `LOGP` = `VF_PREDS` = 0.
        """
        with torch.no_grad():
            mu = self.mu(self.net.actor, self.flat_obs(self.obs_to_tensor(obs)))
            unit = mu
            noise_scale = self.exploration_scale()
            if explore and noise_scale > 0:
                noise = noise_scale * self.randn(tuple(mu.shape))
                unit = (mu + noise).clamp(-1.0, 1.0)
            actions = self.to_env(unit).cpu().numpy()
        zeros = np.zeros(len(actions), dtype=np.float32)
        return actions, {LOGP: zeros, VF_PREDS: zeros.copy(), ACTION_DIST_INPUTS: mu.cpu().numpy()}

    def export_model(self) -> ActorExport:
        """The actor as a `TanhActor` (`rlflow.export`): greedy ``mu(s)`` in the Box;
        exploring adds noise of std :meth:`exploration_scale`."""
        return tanh_actor_export(self, noise=self.exploration_scale())

    def exploration_scale(self) -> float:
        """The std of this policy's exploration noise in unit space: ``exploration_noise``
        (Ape-X TD3 fixes one per worker)."""
        return float(self.config.exploration_noise)

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """n-step transitions of one episode fragment (`rlflow.replay.replay_transitions`)."""
        config = self.config
        return replay_transitions(batch, n=config.n_step, gamma=config.gamma, owner="TD3Policy")

    def next_value(self, next_obs: torch.Tensor) -> torch.Tensor:
        """``min_i Q_target_i(s', a')`` at the smoothed target action ``a'``."""
        mu = self.mu(self.target_model.actor, next_obs)
        config = self.config
        noise = (config.target_noise * self.randn(tuple(mu.shape))).clamp(
            -config.target_noise_clip, config.target_noise_clip
        )
        unit = (mu + noise).clamp(-1.0, 1.0)
        return self.q_values(self.target_model, next_obs, unit).min(dim=0).values

    def updates_actor(self) -> bool:
        """Whether the next update trains the actor (every ``policy_delay``-th, from the
        first)."""
        return self.update.num_grad_updates % self.config.policy_delay == 0

    def actor_loss(self, obs: torch.Tensor) -> tuple[torch.Tensor | None, dict[str, Any]]:
        """``-mean(Q_1(s, mu(s)))`` on an actor update, else None (the actor is left alone)."""
        if not self.updates_actor():
            return None, {}
        loss = -self.critic_detached(0, obs, self.mu(self.net.actor, obs)).mean()
        return loss, {"actor_loss": loss}

    def update_target(self) -> None:
        """Polyak-average the targets, only after an update that trained the actor."""
        if (self.update.num_grad_updates - 1) % self.config.policy_delay == 0:
            super().update_target()

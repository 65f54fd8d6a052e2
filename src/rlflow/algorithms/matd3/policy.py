"""`MATD3Policy`: MADDPG with TD3's fixes (Ackermann et al., "Reducing Overestimation Bias in
Multi-Agent Domains Using Double Centralized Critics", 2019).

On `rlflow.algorithms.maddpg.policy.MADDPGPolicy` (per-member actors, centralized critics).
Each member has two critics (``twin_q``); in the targets::

    a'_j   = clip(tanh(mu'_j(o'_j)) + eps, -1, 1),  eps = clip(N(0, target_noise), +-clip)   (Box)
    a'_j   = one_hot(argmax(logits'_j + Gumbel noise))        (Discrete: a softmax sample)
    y      = r + gamma^m (1 - d) min(Q'_i1, Q'_i2)(x', a'_1..a'_N)

and the actors train (against their first critic), and the targets move, only on every
``policy_delay``-th update.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F

from rlflow.algorithms.maddpg.policy import MADDPGPolicy
from rlflow.algorithms.matd3.config import MATD3Config
from rlflow.config import AlgorithmConfig
from rlflow.envs.groups import TeamObs

__all__ = ["MATD3Policy"]


class MATD3Policy(MADDPGPolicy):
    """MATD3's policy (module docstring): smoothed targets, delayed actor and target updates."""

    config: MATD3Config
    config_class: ClassVar[type[AlgorithmConfig]] = MATD3Config
    algo_name: ClassVar[str] = "MATD3"

    def target_actions(self, next_team: TeamObs) -> list[torch.Tensor]:
        """The target actors' smoothed actions at the next observations (module docstring)."""
        outs = self.actor_outputs(self.target_model, next_team)
        if self.team.discrete:
            return [
                F.one_hot(
                    (out + self.rand_gumbel(tuple(out.shape))).argmax(dim=1), out.shape[1]
                ).float()
                for out in outs
            ]
        config = self.config
        smoothed = []
        for out in outs:
            noise = (config.target_noise * self.randn(tuple(out.shape))).clamp(
                -config.target_noise_clip, config.target_noise_clip
            )
            smoothed.append((torch.tanh(out) + noise).clamp(-1.0, 1.0))
        return smoothed

    def updates_actor(self) -> bool:
        """Whether the next update trains the actors (every ``policy_delay``-th, from the
        first)."""
        return self.update.num_grad_updates % self.config.policy_delay == 0

    def update_target(self) -> None:
        """Polyak-average the targets, only after an update that trained the actors."""
        if (self.update.num_grad_updates - 1) % self.config.policy_delay == 0:
            super().update_target()

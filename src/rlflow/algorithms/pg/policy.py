"""`PGPolicy`: vanilla policy gradient (REINFORCE), or A2C's loss when a critic is used.

Williams, "Simple Statistical Gradient-Following Algorithms for Connectionist Reinforcement
Learning" (1992); Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning" (2016).

    loss = -mean(logp(a|s) * A) + vf_loss_coeff * mean((V(s) - V_target)^2)
           - entropy_coeff * mean(H(pi(.|s)))

The value term is present only with ``use_critic``. Without a critic ``A`` is the discounted
return (see :meth:`~rlflow.policy.ActorCriticPolicy.postprocess_trajectory`). Reads
`PGConfig`'s ``vf_loss_coeff`` and ``entropy_coeff`` besides the shared settings; A2C and A3C
use this policy with their configs (subclasses of `PGConfig`), through the registry.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from rlflow.algorithms.pg.config import PGConfig
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import ACTIONS, ADVANTAGES, VALUE_TARGETS
from rlflow.policy.entropy_schedule import EntropyCoeffSchedule
from rlflow.policy.policy import ActorCriticPolicy

__all__ = ["PGPolicy"]


class PGPolicy(EntropyCoeffSchedule, ActorCriticPolicy):
    """Policy-gradient policy; A2C-style loss when ``use_critic`` is on.

    Reads the batch columns `OBS`, `ACTIONS`, `ADVANTAGES` and, with a critic,
    `VALUE_TARGETS`. Stats: ``policy_loss``, ``vf_loss`` (0 without a critic), ``entropy``.
    """

    config: PGConfig
    config_class: ClassVar[type[AlgorithmConfig]] = PGConfig

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return the policy-gradient loss on a batch and its parts as stats."""
        dist_inputs, values = self.model_outputs(batch_tensors)
        dist = self.dist_class(dist_inputs)
        logp = dist.logp(batch_tensors[ACTIONS])
        policy_loss = -(logp * batch_tensors[ADVANTAGES]).mean()
        entropy = dist.entropy().mean()
        total = policy_loss - self.entropy_coeff * entropy
        vf_loss = torch.zeros((), device=self.device)
        if self.use_critic:
            vf_loss = (values - batch_tensors[VALUE_TARGETS]).pow(2).mean()
            total = total + self.config.vf_loss_coeff * vf_loss
        stats = {
            "policy_loss": policy_loss,
            "vf_loss": vf_loss,
            "entropy": entropy,
        }
        return total, stats

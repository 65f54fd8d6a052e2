"""`VTracePolicy`: IMPALA's loss, policy gradient on V-trace advantages.

Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance Weighted Actor-Learner
Architectures" (ICML 2018), section 4, on the V-trace targets of
:class:`~rlflow.algorithms.actor_learner.VTracePolicyBase` (computed with the learner's
current pi):

    policy_loss = -mean(log pi(a_t|x_t) * pg_advantages_t)
    vf_loss     = 0.5 * mean((V(x_t) - vs_t)^2)
    loss        = policy_loss + vf_loss_coeff * vf_loss - entropy_coeff * entropy

Reads `IMPALAConfig`'s ``vtrace_clip_rho_threshold``, ``vtrace_clip_pg_rho_threshold``,
``vf_loss_coeff`` and ``entropy_coeff`` (or its schedule) besides the shared settings.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from rlflow.algorithms.actor_learner.policy import VTracePolicyBase
from rlflow.algorithms.impala.config import IMPALAConfig
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import ACTIONS
from rlflow.policy.entropy_schedule import EntropyCoeffSchedule

__all__ = ["VTracePolicy"]


class VTracePolicy(EntropyCoeffSchedule, VTracePolicyBase):
    """IMPALA's policy: policy gradient on V-trace advantages, value regression to ``vs``.

    Reads sequence batches (`rlflow.data.sequences`): the columns `OBS`, `ACTIONS`, `REWARDS`,
    `TERMINATEDS`, `LOGP` (the behaviour policy's log-probabilities) and `BOOTSTRAP`. Stats:
    ``policy_loss``, ``vf_loss``, ``entropy``, ``mean_rho``, ``mean_vs``.
    """

    config: IMPALAConfig
    config_class: ClassVar[type[AlgorithmConfig]] = IMPALAConfig

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return the IMPALA loss on a (mini)batch of sequences and its parts as stats (tensors:
        `TorchPolicy` copies them to the host once per step)."""
        dist_inputs, values = self.model_outputs(batch_tensors)
        dist = self.dist_class(dist_inputs)
        logp = dist.logp(batch_tensors[ACTIONS])
        vt = self.compute_vtrace(batch_tensors, logp, values)
        policy_loss = -vt.mean(vt.time_major(logp) * vt.pg_advantages)
        vf_loss = 0.5 * vt.mean((vt.time_major(values) - vt.vs).pow(2))
        entropy = vt.mean(vt.time_major(dist.entropy()))
        total = policy_loss + self.config.vf_loss_coeff * vf_loss - self.entropy_coeff * entropy
        stats = {
            "policy_loss": policy_loss,
            "vf_loss": vf_loss,
            "entropy": entropy,
            "mean_rho": vt.mean(vt.rhos),
            "mean_vs": vt.mean(vt.vs),
        }
        return total, stats

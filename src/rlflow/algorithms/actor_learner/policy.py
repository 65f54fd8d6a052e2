"""`VTracePolicyBase`: what IMPALA's and APPO's policies share: sequences and V-trace targets.

Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance Weighted Actor-Learner
Architectures" (ICML 2018), section 4. The workers act with a slightly stale policy mu (its
log-probabilities are the batch's `LOGP`); the learner corrects with V-trace, computed on the
learner's current values, on its device (:func:`rlflow.vtrace.vtrace_torch`).

V-trace needs time-ordered sequences. The policy asks its workers for sequences closed by a
bootstrap row (``requires_bootstrap_rows``, `rlflow.data.sequences`): one sub-env's steps within
one episode and one fragment (at most ``max_seq_len`` of them for a model with memory), then a
row holding the observation after the last step. The learner's update sends the sequences'
layout with the batch's tensors (a few integers per sequence, found on the host); on the device
one forward pass over every row gives the values of the steps and of the bootstrap
observations, and the targets are computed there (:meth:`VTracePolicyBase.compute_vtrace`).
Nothing goes back to the host but the stats. Minibatches and learner shards are whole
sequences (`rlflow.learner.PolicyUpdate`).

Every log-probability is the joint one of the whole action (`rlflow.models.MultiCategorical`
sums its components'), so V-trace's ratios ``pi(a|x) / mu(a|x)`` are those of the joint
action for ``MultiDiscrete`` spaces too.

The losses live with their algorithms: `rlflow.algorithms.impala.policy.VTracePolicy` and
`rlflow.algorithms.appo.policy.APPOPolicy`; the thresholds are the family's config group
(`rlflow.algorithms.actor_learner.config.VTraceConfig`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, NamedTuple

import torch

from rlflow.algorithms.actor_learner.config import VTraceConfig
from rlflow.data.sample_batch import LOGP, REWARDS, TERMINATEDS, SampleBatch
from rlflow.data.sequences import LayoutTensors
from rlflow.errors import ConfigError
from rlflow.policy.policy import TorchPolicy
from rlflow.vtrace import vtrace_torch

__all__ = ["VTracePolicyBase", "VTraceTargets"]


class VTraceTargets(NamedTuple):
    """V-trace targets of a batch, time-major ``[T, B]`` on the policy's device (the
    sequences' steps from their start, then padding: `rlflow.data.sequences.SequenceLayout`)."""

    vs: torch.Tensor
    """v_s, the value targets (no gradient)."""
    pg_advantages: torch.Tensor
    """The policy-gradient advantages (no gradient)."""
    rhos: torch.Tensor
    """pi / mu before clipping (no gradient)."""
    steps: torch.Tensor
    """``[T, B]`` row indexes: ``per_row[steps]`` lays a per-row tensor out like the targets."""
    mask: torch.Tensor
    """``[T, B]`` float: 1 on steps, 0 on padding."""

    def time_major(self, per_row: torch.Tensor) -> torch.Tensor:
        """A per-row tensor ``[N, ...]`` laid out ``[T, B, ...]`` like the targets."""
        return per_row[self.steps]

    def mean(self, time_major: torch.Tensor) -> torch.Tensor:
        """The mean of a ``[T, B]`` tensor over the steps (padding left out)."""
        return (time_major * self.mask).sum() / self.mask.sum().clamp(min=1.0)


class VTracePolicyBase(TorchPolicy):
    """A policy that learns on V-trace targets over sequences closed by bootstrap rows.

    Subclasses write ``loss`` (on the targets of :meth:`compute_vtrace`). The workers need no
    bootstrap value (``use_critic`` stays False): the learner bootstraps from each sequence's
    bootstrap row.
    """

    config: VTraceConfig
    requires_bootstrap_rows: ClassVar[bool] = True
    supports_custom_model: ClassVar[bool] = True
    supports_recurrent: ClassVar[bool] = True

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Return the sequences unchanged (V-trace is computed by the learner): the samplers
        hand them fresh, already closed by their bootstrap rows."""
        return batch

    def compute_vtrace(
        self,
        batch_tensors: Mapping[str, torch.Tensor],
        target_logp: torch.Tensor,
        values: torch.Tensor,
    ) -> VTraceTargets:
        """V-trace over every sequence of a batch from `PolicyUpdate.batch_to_tensors`, on its
        device.

        ``target_logp`` and ``values`` are pi's log-probabilities of the batch's actions and the
        learner's V(`OBS`), one per row, bootstrap rows included: a sequence bootstraps from
        V of its bootstrap row's observation (the discount of a step that terminated the
        episode is 0). The padding after a sequence's steps repeats that bootstrap value with
        reward 0, discount 1 and ratio 1, so it adds nothing to any step's target.
        """
        layout = LayoutTensors.of(batch_tensors)
        if layout is None:
            raise ConfigError(
                f"{type(self).__name__}: V-trace learns on sequence batches (rollout workers "
                "close every sequence with a bootstrap row for policies with "
                "requires_bootstrap_rows = True; rlflow.data.sequences)"
            )
        steps, mask = layout.step_index, layout.step_mask  # [T, B]
        not_terminated = 1.0 - batch_tensors[TERMINATEDS][steps].to(values.dtype)
        vs, pg_advantages, rhos = vtrace_torch(
            batch_tensors[LOGP][steps] * mask,
            target_logp[steps] * mask,
            batch_tensors[REWARDS][steps],  # a bootstrap row's reward is 0
            values[steps],
            values[layout.next_rows],
            self.config.gamma * not_terminated * mask + (1.0 - mask),
            clip_rho_threshold=self.config.vtrace_clip_rho_threshold,
            clip_pg_rho_threshold=self.config.vtrace_clip_pg_rho_threshold,
        )
        return VTraceTargets(vs, pg_advantages, rhos, steps, mask)

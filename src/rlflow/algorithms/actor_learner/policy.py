"""`VTracePolicyBase`: what IMPALA's and APPO's policies share: sequences and V-trace targets.

Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance Weighted Actor-Learner
Architectures" (ICML 2018), section 4. The workers act with a slightly stale policy mu (its
log-probabilities are the batch's `LOGP`); the learner corrects with V-trace, computed on the
learner's current values, on its device (:func:`rlflow.vtrace.vtrace_torch`).

V-trace needs time-ordered sequences. The policy asks its workers for sequence batches
(``requires_bootstrap_rows``, `rlflow.data.sequences`): each sequence (one sub-env's steps within
one episode and one fragment) is closed by a bootstrap row holding the observation after its
last step. :meth:`VTracePolicyBase.tensor_columns` finds the sequences on the host from that
column (a few integers per sequence) and sends their time-major ``[T, B]`` layout with the batch;
on the device one forward pass over every row gives the values of the steps and of the bootstrap
observations, and the targets are computed there (:meth:`VTracePolicyBase.compute_vtrace`).
Nothing goes back to the host but the stats. Minibatches are whole sequences.

Every log-probability is the joint one of the whole action (`rlflow.models.MultiCategorical`
sums its components'), so V-trace's ratios ``pi(a|x) / mu(a|x)`` are those of the joint
action for ``MultiDiscrete`` spaces too.

The losses live with their algorithms: `rlflow.algorithms.impala.policy.VTracePolicy` and
`rlflow.algorithms.appo.policy.APPOPolicy`. A subclass sets ``clip_rho``, ``clip_pg_rho``,
``vf_loss_coeff`` and ``entropy_coeff`` from its config.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np
import numpy.typing as npt
import torch

from rlflow.data.sample_batch import LOGP, REWARDS, TERMINATEDS, SampleBatch
from rlflow.data.sequences import SequenceLayout, sequence_slices
from rlflow.policy.policy import TorchPolicy
from rlflow.vtrace import vtrace_torch

__all__ = ["VTracePolicyBase", "VTraceTargets"]

Array = npt.NDArray[Any]

# The sequence layout travels with the batch's tensors under these keys (no column has them).
_STEPS = "_seq_steps"
_MASK = "_seq_mask"
_BOOTSTRAP_ROWS = "_seq_bootstrap_rows"
_LAST_ROWS = "_seq_last_rows"


class VTraceTargets(NamedTuple):
    """V-trace targets of a batch, time-major ``[T, B]`` on the policy's device (see
    `rlflow.data.sequences.SequenceLayout`: padding first, then each sequence's steps)."""

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
    """A policy that learns on V-trace targets: sequences, V-trace, contiguous minibatches.

    Subclasses write ``loss`` (on the targets of :meth:`compute_vtrace`) and set the attributes
    below from their config. The workers need no bootstrap value (``use_critic`` stays False):
    the learner bootstraps from each sequence's bootstrap row.
    """

    clip_rho: float
    """rho_bar of V-trace (``vtrace_clip_rho_threshold``)."""
    clip_pg_rho: float
    """pg_rho_bar of V-trace (``vtrace_clip_pg_rho_threshold``)."""
    vf_loss_coeff: float
    """Weight of the value loss."""
    entropy_coeff: float
    """Weight of the entropy bonus."""

    requires_bootstrap_rows = True
    """Workers send sequence batches: each sequence closed by a bootstrap row
    (`rlflow.data.sequences`)."""

    supports_custom_model: ClassVar[bool] = True
    supports_recurrent: ClassVar[bool] = True

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Return the sequence unchanged (V-trace is computed by the learner): the samplers
        hand it a fresh batch, already closed by its bootstrap row."""
        return batch

    def tensor_columns(self, batch: Mapping[str, Array]) -> dict[str, Array]:
        """The batch's columns and its sequence layout (`SequenceLayout`, found on the host from
        the `BOOTSTRAP` column: a few integers per sequence), for :meth:`batch_to_tensors`."""
        layout = SequenceLayout(batch)
        return {
            **super().tensor_columns(batch),
            _STEPS: layout.steps,
            _MASK: layout.mask.astype(np.float32),
            _BOOTSTRAP_ROWS: layout.bootstrap_rows,
            _LAST_ROWS: layout.last_rows,
        }

    def shard(self, batch: SampleBatch) -> tuple[int, int, float]:
        """Under ``data_parallel``: this learner's run of whole sequences (the sequences cut
        into contiguous shards by count, `rlflow.policy.data_parallel.shard_bounds`), weighted
        by its share of the steps (V-trace's losses are means over steps, padding left out)."""
        assert self.data_parallel is not None
        layout = SequenceLayout(batch)
        first, end, weight = self.data_parallel.share_runs(layout.lengths)
        if first == end or weight == 0.0:
            return 0, 0, 0.0
        rows = int(layout.starts[first]), int(layout.bootstrap_rows[end - 1]) + 1
        return *rows, weight

    def compute_vtrace(
        self,
        batch_tensors: Mapping[str, torch.Tensor],
        target_logp: torch.Tensor,
        values: torch.Tensor,
    ) -> VTraceTargets:
        """V-trace over every sequence of a batch from :meth:`batch_to_tensors`, on its device.

        ``target_logp`` and ``values`` are pi's log-probabilities of the batch's actions and the
        learner's V(`OBS`), one per row, bootstrap rows included: a sequence bootstraps from
        V of its bootstrap row's observation, 0 when its last step terminated the episode.
        """
        steps, mask = batch_tensors[_STEPS], batch_tensors[_MASK]
        terminated = batch_tensors[TERMINATEDS].to(values.dtype)
        bootstrap = values[batch_tensors[_BOOTSTRAP_ROWS]] * (
            1.0 - terminated[batch_tensors[_LAST_ROWS]]
        )
        vs, pg_advantages, rhos = vtrace_torch(
            batch_tensors[LOGP][steps],
            target_logp[steps],
            batch_tensors[REWARDS][steps],
            values[steps],
            bootstrap,
            self.gamma * (1.0 - terminated[steps]),
            clip_rho_threshold=self.clip_rho,
            clip_pg_rho_threshold=self.clip_pg_rho,
        )
        return VTraceTargets(vs, pg_advantages, rhos, steps, mask)

    def _minibatch_steps(
        self, batch: SampleBatch, num_sgd_iter: int, size: int, rng: np.random.Generator
    ) -> Iterator[dict[str, Any]]:
        """One optimizer step per minibatch of whole sequences (`learn_on_minibatches`
        averages them; the stats stay on the device until then).

        Unlike the base class the rows are not shuffled (V-trace needs sequences): the batch
        is cut into consecutive runs of whole sequences of at least ``sgd_minibatch_size`` steps
        (`rlflow.data.sequences.sequence_slices`; the last may be shorter) and each epoch visits
        them in an order drawn from ``rng``.
        """
        slices = sequence_slices(batch, max(1, size))
        for _ in range(num_sgd_iter):
            for k in rng.permutation(len(slices)).tolist():
                yield self._step(batch.slice(*slices[k]))

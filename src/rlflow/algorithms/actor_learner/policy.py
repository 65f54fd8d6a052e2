"""`VTracePolicyBase`: what IMPALA's and APPO's policies share: sequences and V-trace targets.

Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance Weighted Actor-Learner
Architectures" (ICML 2018), section 4. The workers act with a slightly stale policy mu (its
log-probabilities are the batch's `LOGP`); the learner corrects with V-trace
(:func:`rlflow.vtrace.vtrace`), computed on the learner's current values.

V-trace needs time-ordered sequences. A worker's batch is ordered by sub-env, then time, and
train batches concatenate several of them, so :func:`sequence_ends` cuts the rows into
sequences: row i continues into row i+1 only when both have the same `EPS_ID`, row i did not
end its episode and row i's `NEXT_OBS` is row i+1's `OBS`. Each sequence bootstraps from the
learner's V(`NEXT_OBS`) of its last row (0 after a terminal step). The policy asks its workers
for `NEXT_OBS` (``requires_next_obs``) so that any contiguous slice of a batch is a valid input,
which is what lets :meth:`VTracePolicyBase.learn_on_minibatches` cut minibatches anywhere.

Every log-probability is the joint one of the whole action (`rlflow.models.MultiCategorical`
sums its components'), so V-trace's ratios ``pi(a|x) / mu(a|x)`` are those of the joint
action for ``MultiDiscrete`` spaces too.

The losses live with their algorithms: `rlflow.algorithms.impala.policy.VTracePolicy` and
`rlflow.algorithms.appo.policy.APPOPolicy` (a shared base stays in `rlflow.policy`, below the
algorithms, so that neither algorithm imports the other). A subclass sets ``clip_rho``,
``clip_pg_rho``, ``vf_loss_coeff`` and ``entropy_coeff`` from its config.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch

from rlflow.checks import check_int
from rlflow.data.sample_batch import (
    ACTIONS,
    EPS_ID,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.policy.policy import TorchPolicy
from rlflow.vtrace import VTraceReturns, vtrace

__all__ = ["VTracePolicyBase", "sequence_ends"]

Array = npt.NDArray[Any]


def sequence_ends(
    obs: npt.ArrayLike,
    next_obs: npt.ArrayLike,
    eps_id: npt.ArrayLike,
    terminateds: npt.ArrayLike,
    truncateds: npt.ArrayLike,
) -> npt.NDArray[np.bool_]:
    """Which rows end a time-ordered sequence (``[N]`` bools; the last row always does).

    Row i continues into row i+1 iff ``eps_id[i] == eps_id[i+1]``, row i neither terminated
    nor truncated, and ``next_obs[i] == obs[i+1]`` (so two fragments of one episode that happen
    to be adjacent are joined, while rows of different sub-envs or out of order never are).

    >>> sequence_ends([0, 1, 5, 6], [1, 2, 6, 7], [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0])
    array([False,  True, False,  True])
    """
    obs_a, next_a = np.asarray(obs), np.asarray(next_obs)
    eps, term, trunc = np.asarray(eps_id), np.asarray(terminateds), np.asarray(truncateds)
    n = eps.shape[0]
    ends = np.ones(n, dtype=bool)
    if n > 1:
        same_obs = (next_a[:-1] == obs_a[1:]).reshape(n - 1, -1).all(axis=1)
        continues = (eps[1:] == eps[:-1]) & ~term[:-1].astype(bool) & ~trunc[:-1].astype(bool)
        ends[:-1] = ~(continues & same_obs)
    return ends


def host_array(value: Any) -> Array:
    """``value`` as a numpy array in host memory (a tensor on any device is detached and
    copied to CPU first)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


class VTracePolicyBase(TorchPolicy):
    """A policy that learns on V-trace targets: sequences, V-trace, contiguous minibatches.

    Subclasses write ``loss`` and set the attributes below from their config. The workers need
    no bootstrap value (``use_critic`` stays False): the learner bootstraps from `NEXT_OBS`.
    """

    clip_rho: float
    """rho_bar of V-trace (``vtrace_clip_rho_threshold``)."""
    clip_pg_rho: float
    """pg_rho_bar of V-trace (``vtrace_clip_pg_rho_threshold``)."""
    vf_loss_coeff: float
    """Weight of the value loss."""
    entropy_coeff: float
    """Weight of the entropy bonus."""

    requires_next_obs = True
    """Workers store `NEXT_OBS`, from which sequences bootstrap (see :func:`sequence_ends`)."""

    supports_custom_model: ClassVar[bool] = True

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Return a copy of the fragment unchanged: V-trace is computed by the learner."""
        return batch.copy()

    def compute_vtrace(
        self,
        batch: Mapping[str, Any],
        target_logp: npt.ArrayLike | torch.Tensor,
        values: npt.ArrayLike | torch.Tensor,
    ) -> VTraceReturns:
        """V-trace over every sequence of ``batch``; flat ``[N]`` arrays in row order.

        ``target_logp`` and ``values`` are pi's log-probabilities of the batch's actions and the
        learner's V(`OBS`), one per row (arrays, or tensors on any device). Bootstrap values
        are the learner's V(`NEXT_OBS`) at each sequence's last row, 0 after a terminal step.
        """
        obs, next_obs = host_array(batch[OBS]), host_array(batch[NEXT_OBS])
        terminated = host_array(batch[TERMINATEDS]).astype(bool)
        eps_id, truncated = host_array(batch[EPS_ID]), host_array(batch[TRUNCATEDS])
        ends = sequence_ends(obs, next_obs, eps_id, terminated, truncated)
        end_rows = np.flatnonzero(ends)
        bootstrap = np.zeros(obs.shape[0], dtype=np.float64)
        live = end_rows[~terminated[end_rows]]
        if live.size:
            bootstrap[live] = self.value(next_obs[live])
        discounts = self.gamma * (1.0 - terminated.astype(np.float64))
        behaviour = host_array(batch[LOGP]).astype(np.float64)
        target = host_array(target_logp).astype(np.float64)
        rewards = host_array(batch[REWARDS]).astype(np.float64)
        vals = host_array(values).astype(np.float64)
        parts: list[VTraceReturns] = []
        start = 0
        for end in end_rows.tolist():
            rows = slice(start, end + 1)
            parts.append(
                vtrace(
                    behaviour[rows],
                    target[rows],
                    rewards[rows],
                    vals[rows],
                    bootstrap[end],
                    discounts[rows],
                    clip_rho_threshold=self.clip_rho,
                    clip_pg_rho_threshold=self.clip_pg_rho,
                )
            )
            start = end + 1
        return VTraceReturns(*(np.concatenate(field) for field in zip(*parts, strict=True)))

    def _check_columns(self, batch_tensors: Mapping[str, torch.Tensor]) -> None:
        """Raise ConfigError naming the missing columns (e.g. a worker without NEXT_OBS)."""
        needed = (OBS, NEXT_OBS, ACTIONS, REWARDS, TERMINATEDS, TRUNCATEDS, EPS_ID, LOGP)
        missing = [c for c in needed if c not in batch_tensors]
        if missing:
            raise ConfigError(
                f"{type(self).__name__}.loss: the batch lacks columns {missing}; it needs "
                f"{list(needed)} (rollout workers add NEXT_OBS for policies with "
                "requires_next_obs = True)"
            )

    def _minibatch_steps(
        self, batch: SampleBatch, num_sgd_iter: int, size: int, rng: np.random.Generator
    ) -> Iterator[dict[str, float]]:
        """One optimizer step per *contiguous* minibatch (`learn_on_minibatches` averages them).

        Unlike the base class the rows are not shuffled (V-trace needs sequences): the batch
        is cut into consecutive slices of ``sgd_minibatch_size`` rows (the last may be shorter)
        and each epoch visits them in an order drawn from ``rng``.
        """
        check_int(size, f"{type(self).__name__}.learn_on_minibatches: sgd_minibatch_size")
        size = max(1, size)
        starts = list(range(0, batch.count, size))
        for _ in range(num_sgd_iter):
            for start in rng.permutation(starts).tolist():
                yield self.learn_on_batch(batch.slice(start, start + size))

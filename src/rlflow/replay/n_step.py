"""`n_step_transitions`: a rollout fragment -> n-step transitions for Q-learning targets;
`replay_transitions`: the same, with only the columns a Q-learner replays."""

from __future__ import annotations

import numpy as np

from rlflow.checks import check_int, check_number
from rlflow.data.sample_batch import (
    ACTIONS,
    DISCOUNTS,
    EPS_ID,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.returns import n_step_targets

__all__ = ["DISCOUNTS", "n_step_transitions", "replay_transitions"]


def n_step_transitions(batch: SampleBatch, *, n: int, gamma: float) -> SampleBatch:
    """Turn a rollout fragment into n-step transitions, one per row (uses `n_step_targets`).

    The fragment is cut into episode runs: a run ends after a row that is terminated or
    truncated, where `EPS_ID` changes, and at the fragment's end. Within a run, row t gets
    ``REWARDS = sum_{k<m} gamma^k r_{t+k}`` with ``m = min(n, steps left in the run)``,
    ``NEXT_OBS`` = the next observation of row ``t + m - 1``, ``TERMINATEDS`` (and
    `TRUNCATEDS`, when present) of that row, and ``DISCOUNTS = gamma^m``, so the target is
    ``REWARDS + DISCOUNTS * (1 - TERMINATEDS) * max_a Q(NEXT_OBS, a)``. Windows are not joined
    across fragments: the last rows of a cut-off run bootstrap earlier (a valid, shorter target).

    Needs `OBS`, `NEXT_OBS`, `REWARDS`, `TERMINATEDS`; other columns are kept per row. Returns a
    new batch; ``batch`` is not modified.

    Example:
        >>> b = SampleBatch({OBS: [0, 1, 2], NEXT_OBS: [1, 2, 3], REWARDS: [1.0, 1.0, 1.0],
        ...                  TERMINATEDS: [False, False, True]})
        >>> out = n_step_transitions(b, n=2, gamma=0.5)
        >>> out[REWARDS].tolist(), out[NEXT_OBS].tolist(), out[DISCOUNTS].tolist()
        ([1.5, 1.5, 1.0], [2, 3, 3], [0.25, 0.25, 0.5])
    """
    where = "n_step_transitions"
    check_int(n, f"{where}: n", low=1)
    check_number(gamma, f"{where}: gamma", low=0.0, high=1.0)
    missing = [c for c in (OBS, NEXT_OBS, REWARDS, TERMINATEDS) if c not in batch]
    if missing:
        raise ConfigError(f"{where}: batch lacks columns {missing}; columns are {sorted(batch)}")
    size = batch.count
    terminated = batch[TERMINATEDS].astype(bool)
    ends = terminated | batch[TRUNCATEDS].astype(bool) if TRUNCATEDS in batch else terminated
    ends = ends.copy()
    if EPS_ID in batch and size:
        ends[:-1] |= batch[EPS_ID][1:] != batch[EPS_ID][:-1]
    if size:
        ends[-1] = True
    stops = np.flatnonzero(ends) + 1
    starts = np.concatenate(([0], stops[:-1])).astype(np.int64)
    returns = np.zeros(size, dtype=np.float64)
    next_index = np.zeros(size, dtype=np.int64)
    discounts = np.zeros(size, dtype=np.float32)
    for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
        run = n_step_targets(batch[REWARDS][a:b], terminated[a:b], gamma, n)
        returns[a:b] = run.returns
        next_index[a:b] = run.next_index + a
        discounts[a:b] = run.discounts
    out = batch.copy()
    out[REWARDS] = returns.astype(np.result_type(batch[REWARDS].dtype, np.float32))
    out[NEXT_OBS] = batch[NEXT_OBS][next_index]
    out[TERMINATEDS] = terminated[next_index]
    if TRUNCATEDS in batch:
        out[TRUNCATEDS] = batch[TRUNCATEDS][next_index]
    out[DISCOUNTS] = discounts
    return out


def replay_transitions(batch: SampleBatch, *, n: int, gamma: float, owner: str) -> SampleBatch:
    """One episode fragment -> the n-step transitions a Q-learner replays (SAC, TD3).

    Keeps only `OBS`, `ACTIONS`, `REWARDS`, `NEXT_OBS`, `TERMINATEDS` and `DISCOUNTS`
    (:func:`n_step_transitions`), with `OBS` and `ACTIONS` copied: workers reuse their rollout
    buffers. `ConfigError` naming ``owner`` if a column is missing.
    """
    kept = (OBS, ACTIONS, REWARDS, NEXT_OBS, TERMINATEDS)
    missing = [c for c in kept if c not in batch]
    if missing:
        raise ConfigError(
            f"{owner}.postprocess_trajectory: batch lacks {missing}; columns are "
            f"{sorted(batch)} (rollout workers add NEXT_OBS for this policy)"
        )
    steps = n_step_transitions(SampleBatch({c: batch[c] for c in kept}), n=n, gamma=gamma)
    return SampleBatch(
        {
            OBS: batch[OBS].copy(),
            ACTIONS: batch[ACTIONS].copy(),
            REWARDS: steps[REWARDS].astype(np.float32),
            NEXT_OBS: steps[NEXT_OBS],
            TERMINATEDS: steps[TERMINATEDS],
            DISCOUNTS: steps[DISCOUNTS],
        }
    )

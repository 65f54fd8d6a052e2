"""Replay buffers: uniform `ReplayBuffer`, `PrioritizedReplayBuffer`, `SequenceReplayBuffer`
(recurrent replay: sequences as items), and `replay_forever`.

A buffer keeps the last ``capacity`` transitions (rows) in a `rlflow.replay.ring.ColumnarRing`:
one preallocated numpy array per column, written as a ring, next observations stored by
reference where possible (see that module). No Python object is kept per row.

Prioritized replay follows Schaul et al., "Prioritized Experience Replay" (ICLR 2016):
``P(i) = p_i^alpha / sum_k p_k^alpha`` and ``w_i = (N * P(i))^-beta / max_j w_j``.

`LinearSchedule` (`rlflow.schedules`), `n_step_transitions` and `DISCOUNTS`
(`rlflow.replay.n_step`) are importable from here too, as before the split.

Example:
    >>> from rlflow.data.sample_batch import REWARDS
    >>> buf = ReplayBuffer(4, seed=0)
    >>> buf.add(SampleBatch({REWARDS: [1.0, 2.0, 3.0, 4.0, 5.0]}))
    >>> len(buf), sorted(set(buf.sample(100)[REWARDS].tolist()))
    (4, [2.0, 3.0, 4.0, 5.0])
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.checks import check_int, check_number
from rlflow.data.sample_batch import (
    ACTIONS,
    BOOTSTRAP,
    OBS,
    PREV_ACTIONS,
    PREV_REWARDS,
    REWARDS,
    SEQ_STEPS,
    SEQ_TERMINATED,
    TERMINATEDS,
    SampleBatch,
)
from rlflow.data.sequences import SequenceLayout
from rlflow.errors import ConfigError
from rlflow.models.memory import state_in_key, stored_state
from rlflow.replay.n_step import DISCOUNTS, n_step_transitions
from rlflow.replay.ring import BATCH_INDEXES, WEIGHTS, ColumnarRing
from rlflow.replay.segment_tree import MinSegmentTree, SumSegmentTree, next_power_of_two
from rlflow.schedules import LinearSchedule

__all__ = [
    "BATCH_INDEXES",
    "DISCOUNTS",
    "WEIGHTS",
    "LinearSchedule",
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "SequenceReplayBuffer",
    "fold_sequences",
    "n_step_transitions",
    "replay_forever",
]

IntArray = npt.NDArray[np.int64]
Array = npt.NDArray[Any]


class ReplayBuffer:
    """Uniform experience replay over the last ``capacity`` transitions (rows).

    Args:
        capacity: number of transitions kept, >= 1; when full, `add` overwrites the oldest.
        seed: seed of the sampling RNG (None: fresh entropy).

    Storage and memory: see the module docstring. `stats` reports ``bytes_per_transition``.
    """

    def __init__(self, capacity: int, *, seed: int | None = None) -> None:
        """Create an empty buffer; arrays are allocated on the first `add`."""
        name = type(self).__name__
        self._capacity = check_int(capacity, f"{name}: capacity", low=1)
        self._ring = ColumnarRing(self._capacity, name)
        self._rng = np.random.default_rng(seed)
        self._num_sampled = 0

    @property
    def capacity(self) -> int:
        """Maximum number of transitions kept."""
        return self._capacity

    def __len__(self) -> int:
        """Number of transitions stored (at most `capacity`)."""
        return self._ring.size

    @property
    def num_added(self) -> int:
        """Transitions added since the buffer was made (evicted ones included)."""
        return int(self._ring.added)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(len={len(self)}, capacity={self._capacity})"

    def add(self, batch: SampleBatch) -> None:
        """Append the rows of ``batch`` in order, overwriting the oldest rows when full.

        A batch with more than `capacity` rows keeps only its last `capacity` rows, in the slots
        they would have had if written one by one. Columns
        `BATCH_INDEXES` and `WEIGHTS` (from an earlier `sample`) are dropped. Every batch must
        have the columns, row shapes and dtype kinds of the first one (`ConfigError`).
        """
        if not isinstance(batch, SampleBatch):
            raise ConfigError(
                f"{type(self).__name__}.add: batch must be a SampleBatch, got "
                f"{type(batch).__name__}"
            )
        self._on_added(self._ring.write(batch))

    def _on_added(self, slots: IntArray) -> None:
        """Hook for subclasses: ``slots`` were just (over)written."""

    def sample(self, num_items: int) -> SampleBatch:
        """``num_items`` transitions drawn uniformly with replacement, as fresh arrays.

        The batch has the stored columns, `NEXT_OBS` when added, and `BATCH_INDEXES` (the slot of
        each row). Raises `ConfigError` when the buffer is empty.
        """
        idx = self._sample_indexes(self._check_sample(num_items))
        batch = self._ring.gather(idx)
        batch[BATCH_INDEXES] = idx
        self._num_sampled += len(idx)
        return batch

    def _check_sample(self, num_items: int) -> int:
        where = f"{type(self).__name__}.sample"
        count = check_int(num_items, f"{where}: num_items", low=1)
        if len(self) == 0:
            raise ConfigError(
                f"{where}(num_items={num_items}): the buffer is empty (len=0); add batches "
                "first, or wait for learning_starts (see replay_forever)"
            )
        return count

    def _sample_indexes(self, num_items: int) -> IntArray:
        return self._rng.integers(0, len(self), size=num_items, dtype=np.int64)

    def stats(self) -> dict[str, float]:
        """Counters and sizes: ``size``, ``capacity``, ``num_added``, ``num_sampled``,
        ``num_evicted``, ``nbytes`` (allocated) and ``bytes_per_transition`` (nbytes / size)."""
        size = len(self)
        nbytes = self._ring.nbytes()
        return {
            "size": float(size),
            "capacity": float(self._capacity),
            "num_added": float(self._ring.added),
            "num_sampled": float(self._num_sampled),
            "num_evicted": float(self._ring.added - size),
            "nbytes": float(nbytes),
            "bytes_per_transition": nbytes / size if size else 0.0,
        }

    def get_state(self) -> dict[str, Any]:
        """Everything needed to resume (stored rows, counters, RNG state); arrays are copies."""
        return {
            "ring": self._ring.get_state(),
            "rng": self._rng.bit_generator.state,
            "num_sampled": self._num_sampled,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore from `get_state` output; the capacity must match (`ConfigError`)."""
        self._ring.set_state(state["ring"])
        self._rng.bit_generator.state = state["rng"]
        self._num_sampled = int(state["num_sampled"])


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay: row i is drawn with probability p_i^alpha / sum.

    Args:
        capacity: number of transitions kept, >= 1.
        alpha: priority exponent in [0, 1]; 0 is uniform sampling.
        beta: default importance-sampling exponent in [0, 1]; 0 gives weights 1, 1 fully
            corrects the sampling bias. Anneal it with `LinearSchedule` and `sample(beta=)`.
        seed: seed of the sampling RNG.

    New rows get the largest priority seen so far (1.0 at first), so each is likely replayed
    at least once.
    """

    def __init__(
        self, capacity: int, *, alpha: float, beta: float, seed: int | None = None
    ) -> None:
        """Create an empty buffer with sum and min trees over ``capacity`` leaves."""
        super().__init__(capacity, seed=seed)
        self.alpha = check_number(alpha, "PrioritizedReplayBuffer: alpha", low=0.0, high=1.0)
        self.beta = check_number(beta, "PrioritizedReplayBuffer: beta", low=0.0, high=1.0)
        leaves = next_power_of_two(self.capacity)
        self._sum_tree = SumSegmentTree(leaves)
        self._min_tree = MinSegmentTree(leaves)
        self._max_priority = 1.0
        self._initial: npt.NDArray[np.float64] | None = None

    def add(self, batch: SampleBatch) -> None:
        """As `ReplayBuffer.add`; rows get the highest priority seen so far, unless the batch
        has a `WEIGHTS` column: then it holds the rows' initial priorities (Ape-X workers compute
        them from their own TD errors; they must be finite and > 0)."""
        initial = batch.get(WEIGHTS) if isinstance(batch, SampleBatch) else None
        if initial is not None:
            prio = np.asarray(initial, dtype=np.float64)[-self.capacity :]
            bad = ~(np.isfinite(prio) & (prio > 0))
            if bad.any():
                raise ConfigError(
                    f"PrioritizedReplayBuffer.add: initial priorities (column {WEIGHTS!r}) must "
                    f"be finite and > 0, got {float(prio[bad][0])!r}"
                )
            self._initial = prio
        try:
            super().add(batch)
        finally:
            self._initial = None

    def _on_added(self, slots: IntArray) -> None:
        initial = self._initial
        if initial is not None and initial.shape[0] == slots.shape[0]:
            self._max_priority = max(self._max_priority, float(initial.max()))
            values: Any = initial**self.alpha
        else:
            values = np.full(slots.shape[0], self._max_priority**self.alpha)
        # Split at the ring's wrap so each part is a run of consecutive slots (the fast path).
        cuts = np.flatnonzero(np.diff(slots) != 1) + 1
        for run, vals in zip(np.split(slots, cuts), np.split(values, cuts), strict=True):
            self._sum_tree.update_many(run, vals)
            self._min_tree.update_many(run, vals)

    def _sample_indexes(self, num_items: int) -> IntArray:
        mass = self._rng.random(num_items) * self._sum_tree.sum()
        # Rounding can walk past the last stored leaf; clip back into the stored rows.
        return np.minimum(self._sum_tree.find_prefixsum_idx(mass), len(self) - 1)

    def sample(self, num_items: int, beta: float | None = None) -> SampleBatch:
        """As `ReplayBuffer.sample`, drawn by priority, plus a `WEIGHTS` column.

        ``w_i = (N * P(i))^-beta / max_j (N * P(j))^-beta`` with N = len(self) and the max over
        every stored row; ``beta`` defaults to the constructor's.
        """
        where = "PrioritizedReplayBuffer.sample"
        b = self.beta if beta is None else check_number(beta, f"{where}: beta", low=0.0, high=1.0)
        batch = super().sample(num_items)
        total = self._sum_tree.sum()
        prob = self._sum_tree[batch[BATCH_INDEXES]] / total
        prob_min = self._min_tree.min() / total
        size = len(self)
        batch[WEIGHTS] = ((size * prob) ** -b / (size * prob_min) ** -b).astype(np.float32)
        return batch

    def update_priorities(self, indexes: npt.ArrayLike, priorities: npt.ArrayLike) -> None:
        """Set the priorities of rows ``indexes`` (from `BATCH_INDEXES`), e.g. to |TD error|.

        Priorities must be finite and > 0 (add a small epsilon to TD errors); a repeated index
        keeps its last priority. A row overwritten since it was sampled takes the new value.
        """
        where = "PrioritizedReplayBuffer.update_priorities"
        idx = np.asarray(indexes)
        prio = np.asarray(priorities, dtype=np.float64)
        if idx.ndim != 1 or prio.shape != idx.shape:
            raise ConfigError(
                f"{where}: indexes (shape {idx.shape}) and priorities (shape {prio.shape}) must "
                "be 1-D and of equal length"
            )
        if idx.size == 0:
            return
        if not np.issubdtype(idx.dtype, np.integer) or idx.min() < 0 or idx.max() >= len(self):
            raise ConfigError(
                f"{where}: indexes must be ints in [0, len(buffer)={len(self)}), got min "
                f"{idx.min()!r} max {idx.max()!r}"
            )
        bad = ~(np.isfinite(prio) & (prio > 0))
        if bad.any():
            raise ConfigError(
                f"{where}: priorities must be finite and > 0, got {float(prio[bad][0])!r} at "
                f"index {int(idx[bad][0])}; add a small epsilon to |TD error|"
            )
        self._max_priority = max(self._max_priority, float(prio.max()))
        values = prio**self.alpha
        self._sum_tree.update_many(idx, values)
        self._min_tree.update_many(idx, values)

    def stats(self) -> dict[str, float]:
        """`ReplayBuffer.stats` plus ``max_priority``, ``priority_sum`` and ``beta``."""
        out = super().stats()
        out.update(
            max_priority=self._max_priority, priority_sum=self._sum_tree.sum(), beta=self.beta
        )
        return out

    def get_state(self) -> dict[str, Any]:
        """As `ReplayBuffer.get_state`, plus the priorities."""
        state = super().get_state()
        state["priorities"] = self._sum_tree[np.arange(len(self))]
        state["max_priority"] = self._max_priority
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore from `get_state` output (priorities included)."""
        super().set_state(state)
        leaves = next_power_of_two(self.capacity)
        self._sum_tree, self._min_tree = SumSegmentTree(leaves), MinSegmentTree(leaves)
        slots = np.arange(len(state["priorities"]))
        self._sum_tree.update_many(slots, state["priorities"])
        self._min_tree.update_many(slots, state["priorities"])
        self._max_priority = float(state["max_priority"])


_FOLDED_COLUMNS = (OBS, ACTIONS, REWARDS, PREV_ACTIONS, PREV_REWARDS)
"""The per-step columns a folded sequence keeps (those present)."""


def fold_sequences(batch: SampleBatch, length: int) -> SampleBatch:
    """One row per run of at most ``length`` steps of ``batch``'s closed sequences (recurrent
    replay, `SequenceReplayBuffer`: the start-aligned layout of `rlflow.data.sequences`, stored
    one sequence per row).

    Every per-step column (`OBS`, `ACTIONS`, `REWARDS`, and ``prev_actions``/``prev_rewards``
    when present) becomes ``[length + 1, ...]``: the run's steps, then the row it bootstraps
    from (the next step, or the sequence's bootstrap row after its last run), zero-padded; next
    to the run's stored state (``state_in_k`` of its first step), its steps (`SEQ_STEPS`) and
    whether its last step ended the episode (`SEQ_TERMINATED`). `ConfigError` unless every
    sequence is closed by a bootstrap row and the batch has the recurrent state
    (``state_in_0``).
    """
    length = check_int(length, "fold_sequences: length", low=1)
    layout = SequenceLayout.of(batch)
    if layout is None or not layout.closed or "state_in_0" not in batch:
        raise ConfigError(
            f"fold_sequences: the batch needs sequences closed by {BOOTSTRAP!r} rows and the "
            f"recurrent state (state_in_0) of its steps; columns are {sorted(batch)} (rollout "
            "workers write them for a recurrent policy with requires_bootstrap_rows = True)"
        )
    first, steps, boot, last_run = [], [], [], []
    for start, n_steps in zip(layout.starts.tolist(), layout.steps.tolist(), strict=True):
        end = start + n_steps  # the sequence's bootstrap row
        for a in range(start, end, length):
            n = min(length, end - a)
            first.append(a)
            steps.append(n)
            boot.append(a + n)  # the next step's row, or the sequence's bootstrap row
            last_run.append(a + n == end)
    first_a = np.asarray(first, dtype=np.int64)
    steps_a = np.asarray(steps, dtype=np.int64)
    offsets = np.arange(length + 1)
    # [S, length + 1] row indexes: the steps, then the next row, then padding (pointing at the
    # next row; zeroed below).
    index = np.minimum(first_a[:, None] + offsets[None, :], np.asarray(boot)[:, None])
    valid = offsets[None, :] <= steps_a[:, None]
    columns: dict[str, Array] = {}
    for name in _FOLDED_COLUMNS:
        if name in batch:
            gathered = np.asarray(batch[name])[index]
            gathered[~valid] = 0
            columns[name] = gathered
    for k, state in enumerate(stored_state(batch)):
        columns[state_in_key(k)] = np.asarray(state)[first_a]
    columns[SEQ_STEPS] = steps_a
    terminated = np.asarray(batch[TERMINATEDS]).astype(bool)[first_a + steps_a - 1]
    columns[SEQ_TERMINATED] = terminated & np.asarray(last_run, dtype=bool)
    return SampleBatch(columns)


class SequenceReplayBuffer(PrioritizedReplayBuffer):
    """Prioritized replay of sequences (R2D2): ``capacity_steps // sequence_length`` sequences.

    A policy with memory learns from replay only on sequences: consecutive steps of one
    episode, started from the recurrent state the rollout worker had at the first one. ``add``
    takes sampled batches (sequences closed by bootstrap rows, as the rollout workers write them
    for ``requires_bootstrap_rows`` policies) and stores each run of at most
    ``sequence_length`` steps as one item (`rlflow.data.sequences.fold_sequences`);
    ``sample(n)`` draws ``n`` sequences; a sequence's priority is what the learner reports for
    it (R2D2's mix of the largest and the mean |TD error| of its steps). It says how many env
    steps an item holds (:attr:`steps_per_item`), so the replay operators count
    ``train_batch_size`` and ``learning_starts`` in env steps, as for transitions.

    Args:
        capacity_steps: env steps kept (``buffer_size``), >= ``sequence_length``.
        sequence_length: steps per stored sequence (``replay_sequence_length``), >= 1.
        alpha: as `PrioritizedReplayBuffer`.
        beta: as `PrioritizedReplayBuffer`.
        seed: as `PrioritizedReplayBuffer`.
    """

    def __init__(
        self,
        capacity_steps: int,
        *,
        sequence_length: int,
        alpha: float,
        beta: float,
        seed: int | None = None,
    ) -> None:
        """Create an empty buffer of ``capacity_steps // sequence_length`` sequences."""
        self.sequence_length = check_int(
            sequence_length, "SequenceReplayBuffer: sequence_length", low=1
        )
        steps = check_int(capacity_steps, "SequenceReplayBuffer: capacity_steps", low=1)
        super().__init__(max(1, steps // self.sequence_length), alpha=alpha, beta=beta, seed=seed)

    @property
    def steps_per_item(self) -> int:
        """Env steps one item holds at most: the replay operators sample ``train_batch_size
        // steps_per_item`` items and wait for ``learning_starts / steps_per_item``."""
        return self.sequence_length

    def add(self, batch: SampleBatch) -> None:
        """Store the sequences of a sampled ``batch`` (`fold_sequences`), each at the highest
        priority seen so far."""
        if not isinstance(batch, SampleBatch):
            raise ConfigError(
                f"SequenceReplayBuffer.add: batch must be a SampleBatch, got {type(batch).__name__}"
            )
        folded = fold_sequences(batch, self.sequence_length)
        if folded.count:
            super().add(folded)


def replay_forever(
    buffer: ReplayBuffer, *, num_items: int, learning_starts: int = 0
) -> Iterator[SampleBatch | None]:
    """An endless generator of ``buffer.sample(num_items)``, or None while the buffer holds
    fewer than ``max(learning_starts, 1)`` transitions (consumers filter the Nones).

    Arguments are checked now, not on the first item. Reads ``len(buffer)`` before every item,
    so batches added meanwhile count.
    """
    where = "replay_forever"
    count = check_int(num_items, f"{where}: num_items", low=1)
    starts = max(1, check_int(learning_starts, f"{where}: learning_starts", low=0))

    def generate() -> Iterator[SampleBatch | None]:
        while True:
            yield buffer.sample(count) if len(buffer) >= starts else None

    return generate()

"""Replay buffers: uniform `ReplayBuffer`, `PrioritizedReplayBuffer`, n-step transitions.

Storage is columnar: one preallocated numpy array per column, allocated on the first `add` from
that batch's dtypes and row shapes, written as a ring (the oldest transition is overwritten
first). Capacity counts transitions (rows). No Python object is kept per row.

Next observations are stored by reference where possible, so a stored transition costs about
one observation, not two. When a batch has `OBS` and `NEXT_OBS` of the same dtype and shape
(and rows of at least 64 bytes; smaller ones are simply stored twice),
``NEXT_OBS[i]`` is not stored if some *later* row ``j > i`` of the same batch has
``OBS[j] == NEXT_OBS[i]`` (byte-equal; found by hashing rows, then checked): transition i then
points at ring slot j, which lives at least as long as i. The other next observations (usually
one per episode fragment: the last one) go to a small "tail" ring of frames, shared by the rows
that end in the same frame; it grows (up to ``capacity``) only when a frame still in use would
be overwritten. `sample` rebuilds `NEXT_OBS` exactly.

Prioritized replay follows Schaul et al., "Prioritized Experience Replay" (ICLR 2016):
``P(i) = p_i^alpha / sum_k p_k^alpha`` and ``w_i = (N * P(i))^-beta / max_j w_j``.

Example:
    >>> buf = ReplayBuffer(4, seed=0)
    >>> buf.add(SampleBatch({REWARDS: [1.0, 2.0, 3.0, 4.0, 5.0]}))
    >>> len(buf), sorted(set(buf.sample(100)[REWARDS].tolist()))
    (4, [2.0, 3.0, 4.0, 5.0])
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.data.sample_batch import (
    EPS_ID,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.replay.segment_tree import MinSegmentTree, SumSegmentTree, next_power_of_two
from rlflow.returns import n_step_targets

Array = npt.NDArray[Any]
IntArray = npt.NDArray[np.int64]

BATCH_INDEXES = "batch_indexes"
"""Column added by `ReplayBuffer.sample`: the ring slot of each row (int64), for
`PrioritizedReplayBuffer.update_priorities`."""
WEIGHTS = "weights"
"""Column added by `PrioritizedReplayBuffer.sample`: importance weights in (0, 1] (float32)."""
DISCOUNTS = "discounts"
"""Column added by `n_step_transitions`: gamma^m, the discount of the bootstrap value."""

_REPLAY_COLUMNS = (BATCH_INDEXES, WEIGHTS)
_FREE = np.iinfo(np.int64).min
_DEDUP_MIN_BYTES = 64
"""Smaller observations are stored twice: a reference and hashing would cost more than a copy."""
_INITIAL_TAIL_FRACTION = 64
"""The tail starts with capacity / 64 frames (at least 16) and grows by half when full."""


def _check_int(where: str, name: str, value: Any, minimum: int) -> int:
    """Return ``value`` as an int, or raise `ConfigError` unless it is an int ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ConfigError(f"{where}: {name}={value!r} must be an int >= {minimum}")
    return int(value)


def _check_unit(where: str, name: str, value: Any) -> float:
    """Return ``value`` as a float, or raise `ConfigError` unless it is a number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"{where}: {name}={value!r} must be a number in [0, 1]")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class LinearSchedule:
    """A value moving linearly from ``initial`` to ``final`` over ``steps``, then constant.

    Use for the importance-sampling exponent: ``beta = LinearSchedule(initial=0.4, final=1.0,
    steps=100_000)`` then ``buffer.sample(32, beta=beta.value(timestep))``.

    Example:
        >>> LinearSchedule(initial=0.4, final=1.0, steps=10).value(5)
        0.7
    """

    initial: float
    """Value at step 0."""
    final: float
    """Value from ``steps`` on."""
    steps: int
    """Number of steps (env steps, usually) of the ramp, >= 0; 0 means ``final`` at once."""

    def __post_init__(self) -> None:
        """Check that ``steps`` is an int >= 0."""
        _check_int("LinearSchedule", "steps", self.steps, 0)

    def value(self, step: int) -> float:
        """The value at ``step`` (steps before 0 count as 0)."""
        if self.steps == 0:
            return float(self.final)
        frac = min(1.0, max(0.0, step / self.steps))
        return float(self.initial + frac * (self.final - self.initial))


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
    _check_int(where, "n", n, 1)
    _check_unit(where, "gamma", gamma)
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


def _row_bytes(array: Array) -> npt.NDArray[np.uint8]:
    """View (or copy, if not contiguous) ``array`` as ``(rows, bytes per row)`` uint8."""
    flat = np.ascontiguousarray(array).reshape(array.shape[0], -1)
    return flat.view(np.uint8).reshape(array.shape[0], -1)


def _write_ring(store: Array, start: int, values: Array) -> None:
    """Write ``values`` into ``store`` from row ``start`` on, wrapping at the end."""
    first = min(len(values), len(store) - start)
    store[start : start + first] = values[:first]
    if first < len(values):
        store[: len(values) - first] = values[first:]


class _ColumnarRing:
    """The storage of a buffer: columns in a ring, next observations by reference (see module
    docstring). Rows are ring slots ``0 .. capacity - 1``."""

    def __init__(self, capacity: int, where: str) -> None:
        self.capacity = capacity
        self.where = where
        self.added = 0
        self.columns: dict[str, Array] | None = None
        self.dedup = False
        self.next_ref: IntArray = np.zeros(0, dtype=np.int64)  # >= 0: slot; < 0: -(tail + 1)
        self.tail: Array = np.zeros(0)
        self.tail_owner: IntArray = np.zeros(0, dtype=np.int64)  # last row using each frame
        self.tail_pos = 0
        self._hash_keys: npt.NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)

    @property
    def size(self) -> int:
        return min(self.added, self.capacity)

    def nbytes(self) -> int:
        arrays = [*(self.columns or {}).values(), self.next_ref, self.tail, self.tail_owner]
        return sum(int(a.nbytes) for a in arrays)

    def _allocate(self, batch: SampleBatch) -> None:
        obs = batch.get(OBS)
        nxt = batch.get(NEXT_OBS)
        self.dedup = (
            obs is not None
            and nxt is not None
            and obs.dtype == nxt.dtype
            and obs.shape[1:] == nxt.shape[1:]
            and obs[:1].nbytes >= _DEDUP_MIN_BYTES
        )
        stored = {k: v for k, v in batch.items() if not (self.dedup and k == NEXT_OBS)}
        self.columns = {
            k: np.empty((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in stored.items()
        }
        if self.dedup and obs is not None:
            self.next_ref = np.zeros(self.capacity, dtype=np.int64)
            self._allocate_tail(
                min(self.capacity, max(16, self.capacity // _INITIAL_TAIL_FRACTION)), obs
            )
            words = -(-_row_bytes(obs[:1]).shape[1] // 8)
            keys = np.random.default_rng(0x5EED).integers(0, 2**63, size=words, dtype=np.uint64)
            self._hash_keys = keys * np.uint64(2) + np.uint64(1)

    def _allocate_tail(self, frames: int, like: Array) -> None:
        self.tail = np.empty((frames, *like.shape[1:]), dtype=like.dtype)
        self.tail_owner = np.full(frames, _FREE, dtype=np.int64)
        self.tail_pos = 0

    def _check_layout(self, batch: SampleBatch) -> None:
        assert self.columns is not None
        expected = set(self.columns) | ({NEXT_OBS} if self.dedup else set())
        if set(batch) != expected:
            raise ConfigError(
                f"{self.where}.add: batch has columns {sorted(batch)} but the buffer stores "
                f"{sorted(expected)}; every added batch needs the same columns"
            )
        for name, value in batch.items():
            store = self.columns[OBS if (self.dedup and name == NEXT_OBS) else name]
            if value.shape[1:] != store.shape[1:] or not np.can_cast(
                value.dtype, store.dtype, "same_kind"
            ):
                raise ConfigError(
                    f"{self.where}.add: column {name!r} has rows of {value.dtype}"
                    f"{list(value.shape[1:])} but the buffer stores {store.dtype}"
                    f"{list(store.shape[1:])} (set by the first batch)"
                )

    def write(self, batch: SampleBatch) -> IntArray:
        """Store ``batch`` (its last ``capacity`` rows); return the ring slots written."""
        batch = SampleBatch({k: v for k, v in batch.items() if k not in _REPLAY_COLUMNS})
        if batch.count == 0:
            return np.zeros(0, dtype=np.int64)
        if self.columns is None:
            self._allocate(batch)
        else:
            self._check_layout(batch)
        if batch.count > self.capacity:
            # As if every row were written: the dropped rows count as added and evicted.
            self.added += batch.count - self.capacity
            batch = batch.slice(batch.count - self.capacity, batch.count)
        count = batch.count
        assert self.columns is not None
        start = self.added % self.capacity
        for name, store in self.columns.items():
            _write_ring(store, start, batch[name])
        if self.dedup:
            _write_ring(self.next_ref, start, self._next_refs(batch, start))
        self.added += count
        return (start + np.arange(count, dtype=np.int64)) % self.capacity

    def _fingerprint(self, rows: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
        width = self._hash_keys.size * 8
        if rows.shape[1] != width:
            rows = np.pad(rows, ((0, 0), (0, width - rows.shape[1])))
        words = np.ascontiguousarray(rows).view(np.uint64)
        return words.dot(self._hash_keys)  # integer arithmetic wraps mod 2^64

    def _next_refs(self, batch: SampleBatch, start: int) -> IntArray:
        obs_rows, next_rows = _row_bytes(batch[OBS]), _row_bytes(batch[NEXT_OBS])
        count = len(obs_rows)
        obs_fp, next_fp = self._fingerprint(obs_rows), self._fingerprint(next_rows)
        # For each next obs, the last row whose obs hashes equal: the longest-lived candidate.
        order = np.argsort(obs_fp, kind="stable")
        pos = np.maximum(np.searchsorted(obs_fp[order], next_fp, side="right") - 1, 0)
        later = order[pos]
        rows = np.arange(count, dtype=np.int64)
        cand = np.flatnonzero((obs_fp[later] == next_fp) & (later > rows))
        equal = (obs_rows[later[cand]] == next_rows[cand]).all(axis=1)
        found = np.zeros(count, dtype=bool)
        found[cand[equal]] = True
        refs = np.empty(count, dtype=np.int64)
        refs[found] = (start + later[found]) % self.capacity
        missing = np.flatnonzero(~found)
        if missing.size:
            refs[missing] = self._write_tail(batch[NEXT_OBS], next_rows, next_fp, missing)
        return refs

    def _write_tail(
        self, nxt: Array, next_rows: npt.NDArray[np.uint8], fp: Array, missing: IntArray
    ) -> IntArray:
        """Store the next obs of rows ``missing`` as tail frames (rows with equal frames share
        one, owned by the last of them); return their encoded references."""
        order = np.argsort(fp[missing], kind="stable")
        last = np.searchsorted(fp[missing][order], fp[missing], side="right") - 1
        rep = missing[order[last]]
        shared = (next_rows[rep] == next_rows[missing]).all(axis=1)
        frames, inverse = np.unique(np.where(shared, rep, missing), return_inverse=True)
        owners = self.added + frames
        slots = self._reserve_tail(frames.size, alive_from=self.added + len(nxt) - self.capacity)
        self.tail[slots] = nxt[frames]
        self.tail_owner[slots] = owners
        return -(slots[inverse] + 1)

    def _reserve_tail(self, frames: int, alive_from: int) -> IntArray:
        """``frames`` consecutive tail slots whose frames no live row uses, growing if needed.

        Frames are written in the order of their owners (strictly increasing), so a tail of
        ``capacity`` frames never overwrites a live one: growth stops there.
        """
        cap = len(self.tail)
        slots = (self.tail_pos + np.arange(frames, dtype=np.int64)) % cap
        if frames > cap or np.any(self.tail_owner[slots] >= alive_from):
            self._grow_tail(min(self.capacity, max(cap + cap // 2, cap + frames)))
            cap = len(self.tail)
            slots = (self.tail_pos + np.arange(frames, dtype=np.int64)) % cap
        self.tail_pos = int(slots[-1] + 1) % cap
        return slots

    def _grow_tail(self, new_cap: int) -> None:
        old, owners, pos = self.tail, self.tail_owner, self.tail_pos
        cap = len(old)
        self._allocate_tail(new_cap, old)
        # Oldest frame first, so the free slots follow the newest frame.
        _write_ring(self.tail, 0, np.concatenate((old[pos:], old[:pos])))
        self.tail_owner[:cap] = np.concatenate((owners[pos:], owners[:pos]))
        self.tail_pos = cap
        in_tail = self.next_ref < 0
        moved = (-self.next_ref[in_tail] - 1 - pos) % cap
        self.next_ref[in_tail] = -(moved + 1)

    def gather(self, idx: IntArray) -> SampleBatch:
        """The rows at slots ``idx`` (fresh arrays), with `NEXT_OBS` rebuilt."""
        assert self.columns is not None
        out = SampleBatch({k: v[idx] for k, v in self.columns.items()})
        if self.dedup:
            refs = self.next_ref[idx]
            obs = self.columns[OBS]
            in_tail = refs < 0
            # One gather from the ring, then patch the (few) rows whose frame is in the tail.
            nxt = obs[np.where(in_tail, 0, refs)]
            nxt[in_tail] = self.tail[-refs[in_tail] - 1]
            out[NEXT_OBS] = nxt
        return out

    def get_state(self) -> dict[str, Any]:
        size = self.size
        return {
            "capacity": self.capacity,
            "added": self.added,
            "dedup": self.dedup,
            "columns": None
            if self.columns is None
            else {k: v[:size].copy() for k, v in self.columns.items()},
            "next_ref": self.next_ref[:size].copy(),
            "tail": self.tail.copy(),
            "tail_owner": self.tail_owner.copy(),
            "tail_pos": self.tail_pos,
            "hash_keys": self._hash_keys.copy(),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        if state["capacity"] != self.capacity:
            raise ConfigError(
                f"{self.where}.set_state: the state has capacity={state['capacity']} but this "
                f"buffer has capacity={self.capacity}; restore into a buffer of equal capacity"
            )
        columns = state["columns"]
        self.added = int(state["added"])
        self.dedup = bool(state["dedup"])
        self.columns = None
        if columns is not None:
            self.columns = {}
            for name, saved in columns.items():
                self.columns[name] = np.empty((self.capacity, *saved.shape[1:]), saved.dtype)
                self.columns[name][: len(saved)] = saved
        self.next_ref = np.zeros(self.capacity if self.dedup else 0, dtype=np.int64)
        self.next_ref[: len(state["next_ref"])] = state["next_ref"]
        self.tail = state["tail"].copy()
        self.tail_owner = state["tail_owner"].copy()
        self.tail_pos = int(state["tail_pos"])
        self._hash_keys = state["hash_keys"].copy()


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
        self._capacity = _check_int(name, "capacity", capacity, 1)
        self._ring = _ColumnarRing(self._capacity, name)
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
        count = _check_int(where, "num_items", num_items, 1)
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
        self.alpha = _check_unit("PrioritizedReplayBuffer", "alpha", alpha)
        self.beta = _check_unit("PrioritizedReplayBuffer", "beta", beta)
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
        b = self.beta if beta is None else _check_unit(where, "beta", beta)
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


def replay_forever(
    buffer: ReplayBuffer, *, num_items: int, learning_starts: int = 0
) -> Iterator[SampleBatch | None]:
    """An endless generator of ``buffer.sample(num_items)``, or None while the buffer holds
    fewer than ``max(learning_starts, 1)`` transitions (consumers filter the Nones).

    Arguments are checked now, not on the first item. Reads ``len(buffer)`` before every item,
    so batches added meanwhile count.
    """
    where = "replay_forever"
    count = _check_int(where, "num_items", num_items, 1)
    starts = max(1, _check_int(where, "learning_starts", learning_starts, 0))

    def generate() -> Iterator[SampleBatch | None]:
        while True:
            yield buffer.sample(count) if len(buffer) >= starts else None

    return generate()

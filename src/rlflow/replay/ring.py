"""Columnar ring storage for replay buffers: `ColumnarRing`.

One preallocated numpy array per column, allocated on the first `write` from that batch's dtypes
and row shapes, written as a ring (the oldest transition is overwritten first). Capacity counts
transitions (rows). No Python object is kept per row.

Next observations are stored by reference where possible, so a stored transition costs about
one observation, not two. When a batch has `OBS` and `NEXT_OBS` of the same dtype and shape
(and rows of at least 64 bytes; smaller ones are simply stored twice),
``NEXT_OBS[i]`` is not stored if some *later* row ``j > i`` of the same batch has
``OBS[j] == NEXT_OBS[i]`` (byte-equal; found by hashing rows, then checked): transition i then
points at ring slot j, which lives at least as long as i. The other next observations (usually
one per episode fragment: the last one) go to a small "tail" ring of frames, shared by the rows
that end in the same frame; it grows (up to ``capacity``) only when a frame still in use would
be overwritten. `ColumnarRing.gather` rebuilds `NEXT_OBS` exactly.

This is the buffers' storage, not a public API: use `rlflow.replay.ReplayBuffer`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.data.sample_batch import BATCH_INDEXES, NEXT_OBS, OBS, WEIGHTS, SampleBatch
from rlflow.errors import ConfigError

__all__ = ["BATCH_INDEXES", "WEIGHTS", "ColumnarRing"]

Array = npt.NDArray[Any]
IntArray = npt.NDArray[np.int64]


_REPLAY_COLUMNS = (BATCH_INDEXES, WEIGHTS)
"""Columns a sample adds; `ColumnarRing.write` drops them, so a replayed batch can be re-added."""
_FREE = np.iinfo(np.int64).min
_DEDUP_MIN_BYTES = 64
"""Smaller observations are stored twice: a reference and hashing would cost more than a copy."""
_INITIAL_TAIL_FRACTION = 64
"""The tail starts with capacity / 64 frames (at least 16) and grows by half when full."""


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


class ColumnarRing:
    """The storage of a buffer: columns in a ring, next observations by reference (see module
    docstring). Rows are ring slots ``0 .. capacity - 1``."""

    def __init__(self, capacity: int, where: str) -> None:
        """An empty ring of ``capacity`` slots; ``where`` names the owner in error messages."""
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
        """Rows stored (at most ``capacity``)."""
        return min(self.added, self.capacity)

    def nbytes(self) -> int:
        """Bytes allocated by the columns, the references and the tail."""
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
        hashes: npt.NDArray[np.uint64] = words.dot(self._hash_keys)  # wraps mod 2^64
        return hashes

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
        """The stored rows and bookkeeping, as copies."""
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
        """Restore from `get_state` output; the capacity must match (`ConfigError`)."""
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

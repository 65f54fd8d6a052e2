"""Segment trees over numpy arrays: range sums and minima in O(log n), prefix-sum search.

A tree of capacity ``C`` (a power of two) keeps its ``C`` leaf values in ``value[C:2C]`` and, at
every internal node ``k``, ``op(value[2k], value[2k + 1])``, so node 1 holds the reduction of all
leaves. Prioritized replay (Schaul et al., "Prioritized Experience Replay", ICLR 2016) uses a sum
tree to sample index i with probability ``p_i / sum(p)`` and a min tree for the largest
importance weight.

Example:
    >>> tree = SumSegmentTree(4)
    >>> tree.update_many([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0])
    >>> tree.sum(), tree.sum(1, 3)
    (10.0, 5.0)
    >>> tree.find_prefixsum_idx([0.5, 1.0, 9.99]).tolist()
    [0, 1, 3]
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.errors import ConfigError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def next_power_of_two(n: int) -> int:
    """The smallest power of two ``>= n`` (1 for ``n <= 1``)."""
    return 1 << max(0, int(n) - 1).bit_length()


class _SegmentTree:
    """Shared machinery of `SumSegmentTree` and `MinSegmentTree`."""

    def __init__(
        self,
        capacity: int,
        operation: Callable[[FloatArray, FloatArray], FloatArray],
        scalar_operation: Callable[[float, float], float],
        neutral: float,
    ) -> None:
        name = type(self).__name__
        if (
            isinstance(capacity, bool)
            or not isinstance(capacity, int | np.integer)
            or capacity < 1
            or capacity & (capacity - 1)
        ):
            raise ConfigError(
                f"{name}: capacity={capacity!r} must be a positive power of two; round up with "
                f"next_power_of_two({capacity!r})"
            )
        self._capacity = int(capacity)
        self._depth = self._capacity.bit_length() - 1
        self._op = operation
        self._scalar_op = scalar_operation
        self._neutral = float(neutral)
        self._value: FloatArray = np.full(2 * self._capacity, self._neutral, dtype=np.float64)

    @property
    def capacity(self) -> int:
        """Number of leaves."""
        return self._capacity

    def __len__(self) -> int:
        """Number of leaves (equal to `capacity`)."""
        return self._capacity

    def __getitem__(self, idx: Any) -> Any:
        """Leaf value(s): an int gives a float, an index array gives an array (a copy)."""
        idxs = self._check_indexes(idx, "__getitem__")
        values = self._value[idxs + self._capacity]
        return float(values) if values.ndim == 0 else values

    def _check_indexes(self, idx: Any, where: str) -> IntArray:
        """Return ``idx`` as an int64 array after checking ``0 <= idx < capacity``."""
        idxs = np.asarray(idx)
        if idxs.size and not np.issubdtype(idxs.dtype, np.integer):
            raise ConfigError(
                f"{type(self).__name__}.{where}: idx must be integers, got dtype {idxs.dtype}"
            )
        idxs = idxs.astype(np.int64, copy=False)
        if idxs.size and (idxs.min() < 0 or idxs.max() >= self._capacity):
            bad = idxs[(idxs < 0) | (idxs >= self._capacity)].ravel()[0]
            raise ConfigError(
                f"{type(self).__name__}.{where}: idx={int(bad)} is out of range; leaves are "
                f"0 .. {self._capacity - 1}"
            )
        return idxs

    def _check_values(self, values: FloatArray, where: str) -> None:
        """Raise `ConfigError` for values the tree cannot hold (subclasses add rules)."""
        if values.size and not np.all(np.isfinite(values)):
            bad = values[~np.isfinite(values)].ravel()[0]
            raise ConfigError(f"{type(self).__name__}.{where}: value={float(bad)!r} must be finite")

    def update(self, idx: int, value: float) -> None:
        """Set leaf ``idx`` to ``value`` and refresh its ancestors: O(log n)."""
        (i,) = self._check_indexes([idx], "update")
        v = np.asarray([value], dtype=np.float64)
        self._check_values(v, "update")
        node = int(i) + self._capacity
        tree, op = self._value, self._op
        tree[node] = v[0]
        while node > 1:
            node >>= 1
            tree[node] = op(tree[2 * node], tree[2 * node + 1])

    def update_many(self, idxs: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """Set leaves ``idxs`` to ``values`` (broadcast), one vectorized pass per tree level.

        When an index repeats, its last value wins. O(k log n) work for k indexes.
        """
        nodes = self._check_indexes(idxs, "update_many").ravel()
        vals = np.broadcast_to(np.asarray(values, dtype=np.float64), nodes.shape)
        self._check_values(vals, "update_many")
        if nodes.size == 0:
            return
        if nodes.size > 1 and np.all(np.diff(nodes) == 1):
            self._update_run(int(nodes[0]), vals)
            return
        # Keep the last occurrence of each index: numpy leaves the winner of repeated fancy
        # assignments unspecified.
        uniq, first_in_reversed = np.unique(nodes[::-1], return_index=True)
        tree, op = self._value, self._op
        tree[uniq + self._capacity] = vals[::-1][first_in_reversed]
        parents = (uniq + self._capacity) >> 1
        for _ in range(self._depth):
            # Repeated parents recompute the same value, so they need no dedup.
            tree[parents] = op(tree[2 * parents], tree[2 * parents + 1])
            parents >>= 1

    def _update_run(self, start: int, vals: FloatArray) -> None:
        """`update_many` for the leaves ``start, start + 1, ...``: slices instead of indexes
        (ring buffers write runs of consecutive slots)."""
        tree, op = self._value, self._op
        lo = start + self._capacity
        hi = lo + len(vals)
        tree[lo:hi] = vals
        for _ in range(self._depth):
            lo, hi = lo >> 1, ((hi - 1) >> 1) + 1
            tree[lo:hi] = op(tree[2 * lo : 2 * hi : 2], tree[2 * lo + 1 : 2 * hi : 2])

    def reduce(self, start: int = 0, end: int | None = None) -> float:
        """``op`` over leaves ``start:end`` (end exclusive, default all); the neutral element
        (0 for sums, +inf for minima) for an empty range. O(log n)."""
        stop = self._capacity if end is None else end
        if not (
            isinstance(start, int | np.integer)
            and isinstance(stop, int | np.integer)
            and 0 <= start <= stop <= self._capacity
        ):
            raise ConfigError(
                f"{type(self).__name__}: range start={start!r}, end={end!r} must satisfy "
                f"0 <= start <= end <= capacity={self._capacity}"
            )
        if start == 0 and stop == self._capacity:
            return float(self._value[1])
        tree, op = self._value, self._scalar_op
        result = self._neutral
        lo, hi = int(start) + self._capacity, int(stop) + self._capacity
        while lo < hi:
            if lo & 1:
                result = op(result, float(tree[lo]))
                lo += 1
            if hi & 1:
                hi -= 1
                result = op(result, float(tree[hi]))
            lo >>= 1
            hi >>= 1
        return float(result)


class SumSegmentTree(_SegmentTree):
    """Sum tree over non-negative finite leaves (initially 0); supports prefix-sum search.

    Args:
        capacity: number of leaves, a power of two (see `next_power_of_two`).
    """

    def __init__(self, capacity: int) -> None:
        """Build a tree of ``capacity`` zero leaves."""
        super().__init__(capacity, np.add, operator.add, 0.0)

    def _check_values(self, values: FloatArray, where: str) -> None:
        super()._check_values(values, where)
        if values.size and values.min() < 0:
            raise ConfigError(
                f"SumSegmentTree.{where}: value={float(values.min())!r} must be >= 0 "
                "(prefix-sum search needs non-negative leaves)"
            )

    def sum(self, start: int = 0, end: int | None = None) -> float:
        """Sum of leaves ``start:end`` (end exclusive; default all leaves; 0.0 if empty)."""
        return self.reduce(start, end)

    def find_prefixsum_idx(self, prefix: npt.ArrayLike) -> IntArray:
        """For each ``prefix``, the smallest ``i`` with ``sum(0, i + 1) > prefix``.

        Vectorized over an array of prefixes (a scalar gives a 0-d array); every prefix must
        lie in ``[0, sum()]``. For ``0 <= prefix < sum()`` the found leaf is positive, so
        drawing ``prefix = u * sum()`` with ``u ~ U[0, 1)`` picks leaf i with probability
        ``leaf_i / sum()``. ``prefix == sum()`` gives the last positive leaf or a later one.
        """
        mass = np.array(prefix, dtype=np.float64)
        total = self._value[1]
        if mass.size and (not np.all(np.isfinite(mass)) or mass.min() < 0 or mass.max() > total):
            bad = mass[~((mass >= 0) & (mass <= total))].ravel()
            raise ConfigError(
                f"SumSegmentTree.find_prefixsum_idx: prefix={float(bad[0])!r} must be in "
                f"[0, sum()={float(total)!r}]"
            )
        tree = self._value
        node = np.ones(mass.shape, dtype=np.int64)
        for _ in range(self._depth):
            left = 2 * node
            left_sum = tree[left]
            go_right = left_sum <= mass
            mass -= left_sum * go_right
            node = left + go_right
        return node - self._capacity


class MinSegmentTree(_SegmentTree):
    """Min tree over finite leaves (initially +inf, so unset leaves never win a minimum).

    Args:
        capacity: number of leaves, a power of two (see `next_power_of_two`).
    """

    def __init__(self, capacity: int) -> None:
        """Build a tree of ``capacity`` leaves set to +inf."""
        super().__init__(capacity, np.minimum, min, float("inf"))

    def min(self, start: int = 0, end: int | None = None) -> float:
        """Minimum of leaves ``start:end`` (end exclusive; default all; +inf if empty)."""
        return self.reduce(start, end)

"""Segment trees against brute force (hypothesis), plus argument checks."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rlflow.replay.segment_tree as segment_tree_module
from rlflow.errors import ConfigError
from rlflow.replay import MinSegmentTree, SumSegmentTree, next_power_of_two

pytestmark = pytest.mark.timeout(120)

FAST = settings(max_examples=80, deadline=None)

# Integer-valued leaves keep every partial sum exact in float64, so comparisons are exact.
leaves = st.integers(min_value=1, max_value=6).flatmap(
    lambda log_cap: st.lists(
        st.integers(min_value=0, max_value=50), min_size=1 << log_cap, max_size=1 << log_cap
    )
)


def build(cls: type, values: list[int], *, one_by_one: bool):
    tree = cls(len(values))
    if one_by_one:
        for i, v in enumerate(values):
            tree.update(i, float(v))
    else:
        tree.update_many(np.arange(len(values)), np.asarray(values, dtype=float))
    return tree


@FAST
@given(values=leaves, bounds=st.tuples(st.floats(0, 1), st.floats(0, 1)), one=st.booleans())
def test_sum_and_min_over_ranges_match_brute_force(values, bounds, one) -> None:
    n = len(values)
    start, end = sorted(int(b * n) for b in bounds)
    sums = build(SumSegmentTree, values, one_by_one=one)
    mins = build(MinSegmentTree, values, one_by_one=one)
    assert sums.sum(start, end) == sum(values[start:end])
    assert mins.min(start, end) == (min(values[start:end]) if end > start else float("inf"))
    assert sums.sum() == sum(values)
    assert mins.min() == min(values)


@FAST
@given(values=leaves, fractions=st.lists(st.floats(0, 1, exclude_max=True), min_size=1))
def test_prefix_search_matches_cumulative_sum_search(values, fractions) -> None:
    tree = build(SumSegmentTree, values, one_by_one=False)
    total = sum(values)
    if total == 0:
        return
    prefixes = np.asarray(fractions) * total
    expected = np.searchsorted(np.cumsum(values), prefixes, side="right")
    assert tree.find_prefixsum_idx(prefixes).tolist() == expected.tolist()
    assert all(values[i] > 0 for i in expected)


@FAST
@given(
    values=leaves,
    updates=st.lists(st.tuples(st.integers(0, 63), st.integers(0, 50)), min_size=1, max_size=20),
)
def test_update_many_with_repeats_keeps_the_last_value(values, updates) -> None:
    n = len(values)
    idxs = np.asarray([i % n for i, _ in updates])
    vals = np.asarray([v for _, v in updates], dtype=float)
    tree = build(SumSegmentTree, values, one_by_one=False)
    tree.update_many(idxs, vals)
    expected = list(values)
    for i, v in zip(idxs.tolist(), vals.tolist(), strict=True):
        expected[i] = v
    assert tree[np.arange(n)].tolist() == expected
    assert tree.sum() == sum(expected)
    for lo in range(n):
        assert tree.sum(lo, n) == sum(expected[lo:])


@FAST
@given(values=leaves, bounds=st.tuples(st.floats(0, 1), st.floats(0, 1)), fill=st.integers(0, 9))
def test_update_of_a_run_of_consecutive_leaves(values, bounds, fill) -> None:
    n = len(values)
    start, end = sorted(int(b * n) for b in bounds)
    sums = build(SumSegmentTree, values, one_by_one=True)
    mins = build(MinSegmentTree, values, one_by_one=True)
    for tree in (sums, mins):
        tree.update_many(np.arange(start, end), float(fill))
    expected = values[:start] + [fill] * (end - start) + values[end:]
    for lo in range(n):
        assert sums.sum(lo, n) == sum(expected[lo:]) and mins.min(0, lo + 1) == min(
            expected[: lo + 1]
        )


def test_scalar_prefix_and_leaf_access() -> None:
    tree = SumSegmentTree(4)
    tree.update_many([0, 1, 2, 3], [1.0, 0.0, 2.0, 1.0])
    assert int(tree.find_prefixsum_idx(1.0)) == 2
    assert tree[2] == 2.0
    assert next_power_of_two(1) == 1 and next_power_of_two(5) == 8 and next_power_of_two(8) == 8


@pytest.mark.parametrize("capacity", [0, 3, -4, 2.0, True])
def test_capacity_must_be_a_power_of_two(capacity) -> None:
    with pytest.raises(ConfigError, match=f"capacity={capacity!r}"):
        SumSegmentTree(capacity)


def test_bad_updates_and_queries_name_the_value() -> None:
    tree = SumSegmentTree(4)
    with pytest.raises(ConfigError, match="idx=4"):
        tree.update(4, 1.0)
    with pytest.raises(ConfigError, match=r"value=-1\.0"):
        tree.update_many([0, 1], [1.0, -1.0])
    with pytest.raises(ConfigError, match="value=nan"):
        MinSegmentTree(2).update(0, float("nan"))
    with pytest.raises(ConfigError, match="start=3, end=2"):
        tree.sum(3, 2)
    tree.update(0, 1.0)
    with pytest.raises(ConfigError, match=r"prefix=2\.0"):
        tree.find_prefixsum_idx([0.5, 2.0])


def test_docstring_examples_run() -> None:
    result = doctest.testmod(segment_tree_module)
    assert result.failed == 0 and result.attempted > 0

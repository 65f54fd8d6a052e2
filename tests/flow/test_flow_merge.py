"""union and duplicate: orderings, weights, shared contexts, fairness, no busy polling."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rlflow import flow
from rlflow.errors import ConfigError, PlanError

pytestmark = pytest.mark.timeout(120)


def src(items: Any, name: str | None = None) -> flow.LocalIterator[Any]:
    return flow.from_iterable(list(items), name=name)


def test_deterministic_union_is_exact_round_robin() -> None:
    u = src([1, 2, 3]).union(src([10, 20]), src(["a"]), deterministic=True)
    assert u.take(10) == [1, 10, "a", 2, 20, 3]
    assert repr(u).startswith("LocalIterator[LocalUnion[")


def test_weighted_union_pulls_weight_items_per_pass() -> None:
    u = src(range(6)).union(src("abcdef"), round_robin_weights=[1, 2])
    assert u.take(9) == [0, "a", "b", 1, "c", "d", 2, "e", "f"]
    star = src(range(3)).union(src("ab"), round_robin_weights=["*", 1])
    assert star.take(10) == [0, 1, 2, "a", "b"]


def test_union_argument_errors() -> None:
    with pytest.raises(ConfigError, match="has 1 weights for 2 iterators"):
        src([1]).union(src([2]), round_robin_weights=[1])
    with pytest.raises(ConfigError, match='number > 0 or "\\*"'):
        src([1]).union(src([2]), round_robin_weights=[1, 0])
    with pytest.raises(ConfigError, match="must be a LocalIterator"):
        src([1]).union([2])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="at least 2"):
        flow.union([src([1])])


def test_union_merges_the_contexts_of_its_inputs() -> None:
    def count(name: str) -> Any:
        def fn(x: Any) -> Any:
            flow.current_metrics().counters[name] += 1
            return x

        return fn

    a = src([1, 2]).for_each(count("a"))
    b = src([3]).for_each(count("b"))
    u = a.union(b, deterministic=True).for_each(count("out"))
    assert u.take(10) == [1, 3, 2]
    assert dict(u.metrics.counters) == {"a": 2, "b": 1, "out": 3}
    assert a.metrics is u.metrics and b.metrics is u.metrics


def test_chains_have_isolated_contexts() -> None:
    def bump(x: int) -> int:
        flow.current_metrics().counters["n"] += x
        return x

    first = src([1, 2]).for_each(bump)
    second = src([10]).for_each(bump)
    first.take(5)
    second.take(5)
    assert first.metrics.counters["n"] == 3
    assert second.metrics.counters["n"] == 10


def test_duplicate_gives_every_item_to_every_output_in_order() -> None:
    a, b, c = src([1, 2, 3]).duplicate(3)
    u = a.for_each(lambda x: ("a", x)).union(
        b.for_each(lambda x: ("b", x)), c.for_each(lambda x: ("c", x)), deterministic=True
    )
    assert u.take(20) == [(k, x) for x in (1, 2, 3) for k in "abc"]


def test_duplicate_shares_context_and_validates_n() -> None:
    parent = src([1, 2]).for_each(lambda x: x)
    a, b = parent.duplicate(2)
    assert a.metrics is parent.metrics is b.metrics
    with pytest.raises(ConfigError, match=r"duplicate\(n=1\)"):
        parent.duplicate(1)


def test_duplicate_fairness_bounds_how_far_one_output_runs_ahead() -> None:
    pulled: list[int] = []
    parent = src(range(100)).for_each(lambda x: pulled.append(x) or x)
    a, b = parent.duplicate(2)
    u = a.union(b, round_robin_weights=[5, 1])
    out = u.take(12)
    # a may pull only when b has caught up, so the parent is read one item per pass.
    assert out == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert len(pulled) == 6


def test_reading_only_one_duplicate_output_raises_instead_of_hanging() -> None:
    a, _b = src([1, 2, 3]).duplicate(2)
    with pytest.raises(PlanError, match=r"duplicate.*read all outputs"):
        a.take(3)


class Slow(flow.ParallelIteratorWorker):
    """A shard that takes ``delay`` seconds per item."""

    def __init__(self, n: int, delay: float) -> None:
        super().__init__(self._items, repeat=False)
        self.n, self.delay = n, delay

    def _items(self) -> Any:
        for i in range(self.n):
            time.sleep(self.delay)
            yield i


@pytest.mark.ray
def test_async_union_of_slow_actors_blocks_instead_of_spinning(ray_session: None) -> None:
    flow.init(backend="ray")
    Worker = flow.remote(Slow)
    slow_a = flow.from_actors([Worker.remote(5, 0.1)]).gather_async()
    slow_b = flow.from_actors([Worker.remote(5, 0.1)]).gather_async().for_each(lambda x: x + 100)
    u = slow_a.union(slow_b)
    out = u.take(100)
    assert sorted(out) == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]
    # A busy-polling union would make thousands of passes in the ~0.5 s this takes; ours blocks
    # on the pending futures, so it waits about once per arriving item.
    assert u._waiter is not None and u._waiter.waits <= 30


def test_async_union_of_gathers_gets_every_item(backend: str) -> None:
    a = flow.from_range(6, num_shards=2).gather_async()
    b = flow.from_items(["x", "y", "z"], num_shards=1).gather_async()
    out = a.union(b).take(100)
    assert sorted(x for x in out if isinstance(x, int)) == list(range(6))
    assert [x for x in out if isinstance(x, str)] == ["x", "y", "z"]

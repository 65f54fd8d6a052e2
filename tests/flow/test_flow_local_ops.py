"""LocalIterator operators: exact outputs, laziness, NOT_READY retry, hooks, names."""

from __future__ import annotations

import io
from typing import Any

import pytest

from rlflow import flow
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(60)


def test_transforms_exact_outputs() -> None:
    src = flow.from_iterable(range(7))
    assert src.for_each(lambda x: x * 2).take(3) == [0, 2, 4]
    assert flow.from_iterable(range(7)).filter(lambda x: x % 3 == 0).take(10) == [0, 3, 6]
    assert flow.from_iterable(range(7)).batch(3).take(10) == [[0, 1, 2], [3, 4, 5], [6]]
    assert flow.from_iterable([[1, 2], [], [3]]).flatten().take(10) == [1, 2, 3]
    assert flow.from_iterable([1, 2, 3]).combine(lambda x: [x] * x).take(10) == [1, 2, 2, 3, 3, 3]
    doubled = flow.from_iterable([1, 2, 3]).transform(lambda it: (x * 2 for x in it))
    assert doubled.take(10) == [2, 4, 6]
    assert flow.from_iterable(range(5)).take(0) == []


def test_operators_are_lazy_until_read() -> None:
    seen: list[int] = []
    it = flow.from_iterable(range(100)).for_each(lambda x: seen.append(x) or x)
    assert seen == []
    assert it.take(2) == [0, 1]
    assert seen == [0, 1]


def test_shuffle_is_seeded_and_a_permutation() -> None:
    a = flow.from_iterable(range(50)).shuffle(10, seed=1).take(100)
    b = flow.from_iterable(range(50)).shuffle(10, seed=1).take(100)
    assert a == b
    assert sorted(a) == list(range(50))
    assert a != list(range(50))
    assert flow.from_iterable(range(5)).shuffle(1).take(10) == [0, 1, 2, 3, 4]


def test_for_each_calls_again_with_same_item_while_fn_is_not_ready() -> None:
    calls: list[int] = []

    def flaky(x: int) -> Any:
        calls.append(x)
        return flow.NOT_READY if calls.count(x) < 3 else x * 10

    assert flow.from_iterable([1, 2]).for_each(flaky).take(10) == [10, 20]
    assert calls == [1, 1, 1, 2, 2, 2]


def test_on_fetch_start_hook_runs_before_each_fetch() -> None:
    events: list[str] = []

    def source() -> Any:
        for i in range(3):
            events.append(f"produce {i}")
            yield i

    class Timed:
        def _on_fetch_start(self) -> None:
            events.append("fetch")
            flow.current_metrics().counters["fetches"] += 1

        def __call__(self, x: int) -> int:
            events.append(f"use {x}")
            return x

    it = flow.from_iterable(source()).for_each(Timed())
    assert it.take(2) == [0, 1]
    assert events == ["fetch", "produce 0", "use 0", "fetch", "produce 1", "use 1"]
    assert it.metrics.counters["fetches"] == 2


def test_show_writes_one_line_per_item() -> None:
    out = io.StringIO()
    flow.from_iterable(["a", "b", "c"]).show(2, file=out)
    assert out.getvalue() == "a\nb\n"


def test_names_follow_the_lineage() -> None:
    it = flow.from_iterable([1], name="src").for_each(str).filter(bool).batch(2).flatten()
    assert repr(it) == "LocalIterator[src.for_each().filter().batch(2).flatten()]"


def test_argument_errors_name_the_argument() -> None:
    it = flow.from_iterable([1])
    with pytest.raises(ConfigError, match=r"batch\(n\)=0 must be an integer >= 1"):
        it.batch(0)
    with pytest.raises(ConfigError, match="for_each takes a callable"):
        it.for_each(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="shuffle_buffer_size"):
        it.shuffle(0)
    with pytest.raises(ConfigError, match=r"take\(n=-1\)"):
        it.take(-1)


def test_stage_statistics_count_items_and_time(local_backend: None) -> None:
    it = flow.from_range(6, num_shards=2).gather_sync().filter(lambda x: x % 2 == 0)
    assert it.take(10) == [0, 4, 2]
    stats = {label.split("#")[0]: s for label, s in it.metrics.stages.items()}
    assert stats["filter(<lambda>)"].items == 3
    assert stats["batch_across_shards()"].items == 3  # three rounds
    assert stats["flatten()"].items == 6
    assert stats["filter(<lambda>)"].fn_time_s > 0

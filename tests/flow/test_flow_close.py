"""Closing reads: a closed or dropped gather leaves no state on its shard actors."""

from __future__ import annotations

import gc
import re
import sys
from typing import Any

import pytest

from rlflow import flow
from rlflow.errors import PlanError
from rlflow.flow import backend as flow_backend

pytestmark = pytest.mark.timeout(120)


def open_reads(pit: flow.ParallelIterator[Any]) -> list[list[int]]:
    """The read keys each shard actor of ``pit`` holds state for (empty lists: none)."""
    return [flow.get(actor.par_iter_open_reads.remote()) for actor in pit.actors()]


def test_close_frees_each_kind_of_gather_and_reading_it_raises(backend: str) -> None:
    pit = flow.from_range(8, num_shards=2).for_each(lambda x: x + 1)
    gathers = [
        pit.gather_sync(),
        pit.gather_async(num_async=2),
        pit.gather_async(batch_ms=1),
        pit.batch_across_shards(),
        pit.get_shard(1),
    ]
    for gather in gathers:
        assert len(gather.take(3)) == 3
        assert any(open_reads(pit))
        gather.close()
        assert open_reads(pit) == [[], []]
        with pytest.raises(PlanError, match=re.escape(repr(gather)) + " was closed"):
            next(gather)
        gather.close()  # closing twice is fine


def test_dropping_a_gather_frees_its_reads(backend: str) -> None:
    pit = flow.from_range(100, num_shards=2)
    it = pit.gather_async(num_async=3).for_each(lambda x: x * 2)
    assert len(it.take(5)) == 5
    assert all(open_reads(pit))
    del it
    gc.collect()
    assert open_reads(pit) == [[], []]
    for _ in range(3):  # one gather per "iteration" no longer piles up state on the actors
        assert pit.gather_sync().take(2) == [0, 50]
    gc.collect()
    assert open_reads(pit) == [[], []]


def test_close_follows_unions_and_duplicates(backend: str) -> None:
    a = flow.from_range(6, num_shards=2)
    b = flow.from_range(4, num_shards=1)
    a1, a2 = a.gather_async().duplicate(2)
    plan = a1.union(a2, b.gather_sync()).for_each(lambda x: x)
    assert len(plan.take(4)) == 4
    assert all(open_reads(a)) and all(open_reads(b))
    plan.close()
    assert open_reads(a) == [[], []] and open_reads(b) == [[]]
    with pytest.raises(PlanError, match=r"LocalIterator\[LocalUnion.* was closed"):
        plan.take(1)
    with pytest.raises(PlanError, match=r"duplicate\[1\]\] was closed"):
        a2.take(1)


def test_iterators_sharing_a_closed_gather_stop_too(backend: str) -> None:
    pit = flow.from_range(10, num_shards=2)
    gather = pit.gather_sync()
    doubled = gather.for_each(lambda x: 2 * x)
    unread = gather.for_each(lambda x: 3 * x)
    assert doubled.take(1) == [0]
    gather.close()
    with pytest.raises(PlanError, match=r"gather from_range\[10, shards=2\].* was closed"):
        doubled.take(10)
    with pytest.raises(PlanError, match="was closed"):
        unread.take(1)
    assert pit.gather_sync().take(3) == [0, 5, 1]  # a new gather reads afresh


def test_close_never_raises_on_a_dead_actor(backend: str) -> None:
    pit = flow.from_range(6, num_shards=2)
    it = pit.gather_sync()
    assert it.take(2) == [0, 3]
    flow.kill(pit.actors()[0])
    it.close()


def test_an_actor_refuses_a_read_that_is_not_open() -> None:
    worker = flow.ParallelIteratorWorker([1, 2], repeat=False)
    with pytest.raises(PlanError, match="read 7 is not open"):
        worker.par_iter_next(7)
    worker.par_iter_init(7, [], "shard 0")
    assert worker.par_iter_open_reads() == [7] and worker.par_iter_next(7) == 1
    worker.par_iter_close(7)
    worker.par_iter_close(7)  # unknown keys are ignored
    assert worker.par_iter_open_reads() == []


def test_the_first_reads_of_an_actor_get_slots_read_without_a_key() -> None:
    worker = flow.ParallelIteratorWorker(lambda: iter(range(100)), repeat=False)
    slots = [worker.par_iter_init(key, [], "shard 0") for key in (10, 11, 12, 13, 14)]
    assert slots == [0, 1, 2, 3, None]  # READ_SLOTS reads get one; later ones go by key
    assert worker.par_iter_init(12, [], "shard 0") == 2  # the same read: the same slot
    assert worker.par_iter_init(15, [], "shard 0", slot=False) is None
    # Each read has its own chain, whether asked by slot or by key.
    assert [worker.par_iter_next_1(), worker.par_iter_next_1(), worker.par_iter_next(11)] == [
        0,
        1,
        2,
    ]
    assert [worker.par_iter_next_3(), worker.par_iter_next(14), worker.par_iter_next(13)] == [
        0,
        0,
        1,
    ]
    worker.par_iter_close(11)
    with pytest.raises(PlanError, match="no read is open in slot 1"):
        worker.par_iter_next_1()
    assert worker.par_iter_init(16, [], "shard 0") == 1  # a closed read's slot is reused
    assert worker.par_iter_next_1() == 0


def test_gathers_past_the_read_slots_of_an_actor_read_by_key(backend: str) -> None:
    pit = flow.from_range(6, num_shards=2, repeat=True).for_each(lambda x: x * 10)
    gathers = [pit.gather_sync() for _ in range(flow.READ_SLOTS + 2)]
    gathers.append(pit.gather_async())
    firsts = [g.take(4) for g in gathers]
    assert firsts[:-1] == [[0, 30, 10, 40]] * (flow.READ_SLOTS + 2)
    shard0, shard1 = [x for x in firsts[-1] if x < 30], [x for x in firsts[-1] if x >= 30]
    assert shard0 == [0, 10, 20, 0][: len(shard0)]  # async: each shard in its own order
    assert shard1 == [30, 40, 50, 30][: len(shard1)]
    for g in gathers:
        g.close()
    assert open_reads(pit) == [[], []]


class _FakeRay:
    def __init__(self, initialized: bool) -> None:
        self.initialized = initialized

    def is_initialized(self) -> bool:
        return self.initialized


class _Handle:
    """A stand-in for a Ray actor handle whose calls are recorded, or fail."""

    def __init__(self, fail: bool) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail = fail

    @property
    def par_iter_close(self) -> _Handle:
        return self

    def remote(self, *args: Any) -> None:
        if self.fail:
            raise RuntimeError("actor is gone")
        self.calls.append(args)


def test_send_and_forget_skips_a_stopped_ray_and_swallows_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handle = _Handle(fail=False)
    monkeypatch.setitem(sys.modules, "ray", _FakeRay(initialized=False))
    flow_backend.send_and_forget(handle, "par_iter_close", 5)
    assert handle.calls == []  # a call after ray.shutdown() would start a new Ray
    monkeypatch.setitem(sys.modules, "ray", _FakeRay(initialized=True))
    flow_backend.send_and_forget(handle, "par_iter_close", 5)
    assert handle.calls == [(5,)]
    flow_backend.send_and_forget(_Handle(fail=True), "par_iter_close", 5)

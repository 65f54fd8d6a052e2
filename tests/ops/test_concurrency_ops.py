"""Concurrency operators on the local backend: concurrently's orders, queues, learner thread."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest
import torch

from rlflow import flow
from rlflow.algorithms.apex.plan import UpdateWorkerWeights
from rlflow.data import SampleBatch
from rlflow.errors import ConfigError, PlanError, WorkerError
from rlflow.flow import NOT_READY, ActorItem
from rlflow.ops import (
    Enqueue,
    LearnerThread,
    RecordStepsTrained,
    TrainResult,
    concurrently,
    dequeue,
    keys,
)
from rlflow.ops.learner_thread import stop_all_learner_threads

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def items(values: list[Any]) -> flow.LocalIterator[Any]:
    return flow.from_iterable(values)


# ------------------------------------------------------------------------------ concurrently
def test_round_robin_alternates_one_item_each() -> None:
    out = concurrently([items([1, 2, 3]), items([10, 20, 30])]).take(6)
    assert out == [1, 10, 2, 20, 3, 30]


def test_round_robin_weights_one_two_give_exact_order() -> None:
    ops = [items([1, 2, 3]), items([10, 20, 30, 40, 50, 60])]
    out = concurrently(ops, round_robin_weights=[1, 2]).take(9)
    assert out == [1, 10, 20, 2, 30, 40, 3, 50, 60]


def test_round_robin_star_takes_everything_ready() -> None:
    ops = [items([1, 2]), items(list(range(10, 15)))]
    out = concurrently(ops, round_robin_weights=[1, "*"]).take(7)
    assert out == [1, 10, 11, 12, 13, 14, 2]


def test_round_robin_weights_two_one_and_an_input_that_ends() -> None:
    ops = [items([1, 2, 3, 4, 5]), items([10])]
    assert concurrently(ops, round_robin_weights=[2, 1]).take(10) == [1, 2, 10, 3, 4, 5]


def test_output_indexes_drop_items_but_the_other_ops_still_run() -> None:
    seen: list[int] = []
    store_op = items([1, 2, 3]).for_each(lambda x: seen.append(x) or x)
    out = concurrently([store_op, items([10, 20, 30])], output_indexes=[1]).take(3)
    assert out == [10, 20, 30]
    assert seen == [1, 2, 3]


def test_async_mode_gives_every_item_and_ends() -> None:
    out = concurrently([items([1, 2]), items([10, 20, 30])], mode="async").take(10)
    assert sorted(out) == [1, 2, 10, 20, 30]


def test_an_op_that_is_not_ready_lets_the_others_run_in_round_robin() -> None:
    q: queue.Queue[int] = queue.Queue()
    producer = items([1, 2, 3]).for_each(lambda x: q.put(x * 10) or x)
    out = concurrently([producer, dequeue(q)]).take(6)
    assert out == [1, 10, 2, 20, 3, 30]


def test_ops_share_one_context() -> None:
    def count(x: int) -> int:
        flow.current_metrics().counters["n"] += 1
        return x

    merged = concurrently([items([1, 2]).for_each(count), items([3]).for_each(count)])
    assert merged.take(5) == [1, 3, 2]
    assert merged.metrics.counters["n"] == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ops": "one"}, "at least 2 ops"),
        ({"mode": "bulk"}, "mode must be one of"),
        ({"mode": "async", "round_robin_weights": [1, 1]}, "only allowed with mode='round_robin'"),
        ({"round_robin_weights": ["*", "*"]}, 'not every weight may be "*"'),
        ({"round_robin_weights": [1]}, "2 ops"),
        ({"round_robin_weights": [1, 0]}, "number > 0"),
        ({"output_indexes": [2]}, "out of range"),
        ({"output_indexes": [-1]}, "out of range"),
        ({"output_indexes": []}, "at least one"),
    ],
)
def test_concurrently_rejects_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    ops: Any = [items([1]), items([2])]
    if kwargs.pop("ops", None) == "one":
        ops = [items([1])]
    with pytest.raises(ConfigError, match=message):
        concurrently(ops, **kwargs)


def test_concurrently_rejects_a_parallel_iterator() -> None:
    with pytest.raises(ConfigError, match="op 1 must be a LocalIterator"):
        concurrently([items([1]), flow.from_range(4)])  # type: ignore[list-item]


# ------------------------------------------------------------------------------ queues
def test_enqueue_answers_not_ready_when_full() -> None:
    q: queue.Queue[int] = queue.Queue(maxsize=1)
    enqueue = Enqueue(q)
    assert enqueue(1) == 1
    assert enqueue(2) is NOT_READY
    assert q.get_nowait() == 1


def test_enqueue_backpressure_loses_nothing() -> None:
    q: queue.Queue[int] = queue.Queue(maxsize=1)
    producer = items(list(range(6))).for_each(Enqueue(q))
    out = concurrently([producer, dequeue(q)], mode="async", output_indexes=[1]).take(6)
    assert out == list(range(6))


def test_queue_operators_reject_non_queues() -> None:
    with pytest.raises(ConfigError, match=r"queue\.Queue"):
        Enqueue([])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"queue\.Queue"):
        dequeue([])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="callable"):
        dequeue(queue.Queue(), check=True)  # type: ignore[arg-type]


def test_dequeue_raises_when_check_fails() -> None:
    q: queue.Queue[int] = queue.Queue()
    q.put(1)
    it = dequeue(q, check=lambda: False)
    assert next(it) == 1  # what is queued still comes out
    with pytest.raises(WorkerError, match="check\\(\\) returned False"):
        next(it)


def test_dequeue_waits_with_back_off_instead_of_spinning() -> None:
    q: queue.Queue[str] = queue.Queue()
    calls = 0

    def check() -> bool:
        nonlocal calls
        calls += 1
        return True

    timer = threading.Timer(0.3, q.put, args=("late",))
    timer.start()
    assert next(dequeue(q, check=check)) == "late"
    # Polling at most every 5 ms (after a short ramp) checks about 70 times in 0.3 s.
    assert calls < 300


# ------------------------------------------------------------------------------ learner thread
class FakeLearner:
    """A local worker stand-in: counts the batches it learns on, or fails."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.fail_on = fail_on
        self.seen: list[int] = []
        self.version = 0

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, dict[str, float]]:
        if self.fail_on is not None and len(self.seen) == self.fail_on:
            raise ValueError("loss became NaN")
        self.seen.append(batch.count)
        self.version += 1
        return {"default_policy": {"loss": float(batch.count)}}

    def get_weights(self) -> dict[str, int]:
        return {"default_policy": self.version}

    def weights_snapshot(self) -> dict[str, dict[str, torch.Tensor]]:
        return {"default_policy": {"v": torch.tensor(self.version)}}

    def num_grad_updates_per_policy(self) -> dict[str, int]:
        return {"default_policy": self.version}


@pytest.fixture
def learner_factory() -> Any:
    started: list[LearnerThread] = []

    def make(worker: FakeLearner, **kw: Any) -> LearnerThread:
        thread = LearnerThread(worker, **kw)  # type: ignore[arg-type]
        thread.start()
        started.append(thread)
        return thread

    yield make
    for thread in started:
        thread.stop()


def test_learner_thread_trains_and_keeps_the_source_actor(learner_factory: Any) -> None:
    worker = FakeLearner()
    learner = learner_factory(worker)
    batches = [SampleBatch({"x": [0] * n}) for n in (2, 3)]
    feed = items([ActorItem("shard-0", batches[0]), batches[1]]).for_each(Enqueue(learner.inqueue))
    results = dequeue(learner.outqueue, check=learner.check).for_each(RecordStepsTrained())
    out = concurrently([feed, results], mode="async", output_indexes=[1])
    first, second = out.take(2)
    assert first == ActorItem("shard-0", TrainResult(2, {"default_policy": {"loss": 2.0}}))
    assert second == TrainResult(3, {"default_policy": {"loss": 3.0}})
    assert out.metrics.counters[keys.NUM_ENV_STEPS_TRAINED] == 5
    assert out.metrics.counters[keys.NUM_TRAIN_STEPS] == 2
    assert learner.weights_updated
    assert learner.stats()["num_batches"] == 2.0


def test_learner_thread_crash_surfaces_the_original_exception(learner_factory: Any) -> None:
    learner = learner_factory(FakeLearner(fail_on=1))
    for n in (1, 2):
        learner.inqueue.put(SampleBatch({"x": [0] * n}))
    results = dequeue(learner.outqueue, check=learner.check)
    assert next(results).env_steps == 1
    with pytest.raises(ValueError, match="loss became NaN") as info:
        next(results)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "LearnerThread" in notes
    assert "learn_on_batch" in "".join(__import__("traceback").format_tb(info.tb))


def test_learner_thread_rejects_bad_items_and_sizes(learner_factory: Any) -> None:
    with pytest.raises(ConfigError, match="inqueue_size"):
        LearnerThread(FakeLearner(), inqueue_size=0)  # type: ignore[arg-type]
    learner = learner_factory(FakeLearner())
    learner.inqueue.put("not a batch")
    with pytest.raises(PlanError, match="SampleBatch"):
        next(dequeue(learner.outqueue, check=learner.check))


def test_stopped_learner_makes_dequeue_fail_instead_of_hang(learner_factory: Any) -> None:
    learner = learner_factory(FakeLearner())
    learner.stop()
    with pytest.raises(WorkerError, match="check\\(\\) returned False"):
        next(dequeue(learner.outqueue, check=learner.check))


def test_stop_all_learner_threads_stops_every_running_one(learner_factory: Any) -> None:
    learners = [learner_factory(FakeLearner()) for _ in range(2)]  # two local workers
    assert stop_all_learner_threads() == 2
    assert not any(learner.is_alive() for learner in learners)
    assert stop_all_learner_threads() == 0


# ------------------------------------------------------------------------------ weights
class FakeRolloutActor:
    def __init__(self) -> None:
        self.received: list[tuple[Any, Any]] = []

    def set_weights(self, weights: Any, global_vars: Any) -> None:
        self.received.append((weights, global_vars))

    def get_received(self) -> list[tuple[Any, Any]]:
        return self.received


class FakeWorkerSet:
    def __init__(self, local: FakeLearner) -> None:
        self.local = local

    def local_worker(self) -> FakeLearner:
        return self.local


def test_update_worker_weights_counts_steps_per_actor() -> None:
    local = FakeLearner()
    actor_cls = flow.remote(FakeRolloutActor)
    a, b = actor_cls.remote(), actor_cls.remote()
    op = UpdateWorkerWeights(FakeWorkerSet(local), 4)  # type: ignore[arg-type]
    batch = SampleBatch({"x": [0, 0]})
    stream = [ActorItem(a, batch), ActorItem(b, batch), ActorItem(a, batch)]
    out = flow.from_iterable(stream).for_each(op)
    assert out.take(3) == stream
    pushed = {"timestep": 0, "num_grad_updates_per_policy": {"default_policy": 0}}
    assert flow.get(a.get_received.remote()) == [({"default_policy": 0}, pushed)]
    assert flow.get(b.get_received.remote()) == []  # b delivered 2 of 4 steps
    assert out.metrics.counters[keys.NUM_WEIGHT_SYNCS] == 1


def test_update_worker_weights_sends_cached_weights_until_the_learner_updates() -> None:
    local = FakeLearner()
    learner = LearnerThread(local)  # type: ignore[arg-type]
    actor_cls = flow.remote(FakeRolloutActor)
    a, b = actor_cls.remote(), actor_cls.remote()
    op = UpdateWorkerWeights(FakeWorkerSet(local), 2, learner=learner)  # type: ignore[arg-type]
    batch = SampleBatch({"x": [0, 0]})

    def bump(item: ActorItem) -> ActorItem:
        if item.actor is b:
            local.version += 1  # weights change, but the learner has not flagged it yet
        return item

    stream = flow.from_iterable([ActorItem(a, batch), ActorItem(b, batch), ActorItem(a, batch)])
    out = stream.for_each(op).for_each(bump)
    out.take(3)
    learner.weights_updated = True
    flow.from_iterable([ActorItem(b, batch)]).for_each(op).take(1)
    got_a = [w for w, _ in flow.get(a.get_received.remote())]
    got_b = [w for w, _ in flow.get(b.get_received.remote())]
    # Read under the learner's lock as a snapshot (weights_snapshot), then sent as numpy.
    assert [int(w["default_policy"]["v"]) for w in got_a] == [0, 0]
    assert [int(w["default_policy"]["v"]) for w in got_b] == [0, 1]
    assert out.metrics.counters[keys.NUM_WEIGHT_SYNCS] == 3
    assert not learner.weights_updated


def test_update_worker_weights_rejects_bad_input() -> None:
    with pytest.raises(ConfigError, match="max_weight_sync_delay"):
        UpdateWorkerWeights(FakeWorkerSet(FakeLearner()), 0)  # type: ignore[arg-type]
    op = UpdateWorkerWeights(FakeWorkerSet(FakeLearner()), 1)  # type: ignore[arg-type]
    with pytest.raises(PlanError, match="zip_with_source_actor"):
        flow.from_iterable([SampleBatch({"x": [1]})]).for_each(op).take(1)


def test_docstring_examples_run() -> None:
    import doctest

    from rlflow.ops import concurrency as concurrency_module

    result = doctest.testmod(concurrency_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0

"""Replay operators on the local backend: storing, replaying, priorities, target updates."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlflow import flow
from rlflow.data import OBS, REWARDS, SampleBatch
from rlflow.errors import ConfigError, PlanError
from rlflow.flow import ActorItem
from rlflow.ops import (
    StoreToReplayBuffer,
    TrainResult,
    UpdateReplayPriorities,
    UpdateTargetNetwork,
    concurrently,
    keys,
    replay,
)
from rlflow.replay import (
    BATCH_INDEXES,
    WEIGHTS,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    ReplayShardSpec,
    create_replay_actors,
)
from rlflow.schedules import LinearSchedule

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def rows(*values: float) -> SampleBatch:
    return SampleBatch({OBS: np.array(values, dtype=np.float32), REWARDS: np.ones(len(values))})


def counting(counter: str) -> Any:
    def count(batch: SampleBatch) -> SampleBatch:
        flow.current_metrics().counters[counter] += batch.count
        return batch

    return count


# ------------------------------------------------------------------------------ store
def test_store_to_local_buffer_emits_the_input_and_counts() -> None:
    buf = ReplayBuffer(10, seed=0)
    batches = [rows(1, 2), rows(3)]
    out = flow.from_iterable(batches).for_each(StoreToReplayBuffer(local_buffer=buf))
    assert out.take(2) == batches
    assert len(buf) == 3
    assert out.metrics.counters[keys.NUM_ENV_STEPS_STORED] == 3


@pytest.mark.parametrize(
    "kwargs", [{}, {"local_buffer": ReplayBuffer(2), "actors": ["a"]}], ids=["neither", "both"]
)
def test_store_needs_exactly_one_target(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="exactly one of local_buffer"):
        StoreToReplayBuffer(**kwargs)
    with pytest.raises(ConfigError, match="exactly one of local_buffer"):
        replay(**kwargs)


def test_store_rejects_bad_targets_and_items() -> None:
    with pytest.raises(ConfigError, match="ReplayBuffer"):
        StoreToReplayBuffer(local_buffer=[])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="at least one replay shard"):
        StoreToReplayBuffer(actors=[])
    store = StoreToReplayBuffer(local_buffer=ReplayBuffer(4))
    with pytest.raises(PlanError, match="SampleBatch"):
        flow.from_iterable([[1, 2]]).for_each(store).take(1)


def shard_sizes(actors: list[Any]) -> list[int]:
    return [int(flow.get(a.stats.remote())["size"]) for a in actors]


def test_store_to_actors_picks_shards_with_a_seeded_rng() -> None:
    sizes = []
    for _ in range(2):
        actors = create_replay_actors(ReplayShardSpec(num_shards=3, capacity=300, seed=0))
        store = StoreToReplayBuffer(actors=actors, seed=7)
        flow.from_iterable([rows(float(i)) for i in range(30)]).for_each(store).take(30)
        sizes.append(shard_sizes(actors))
    assert sizes[0] == sizes[1]
    assert sum(sizes[0]) == 30
    assert all(s > 0 for s in sizes[0])


# ------------------------------------------------------------------------------ replay
def test_local_replay_is_not_ready_below_learning_starts_so_the_store_op_runs() -> None:
    buf = ReplayBuffer(100, seed=0)
    store_op = flow.from_iterable([rows(i, i) for i in range(5)]).for_each(
        StoreToReplayBuffer(local_buffer=buf)
    )
    replay_op = replay(local_buffer=buf, num_items=3, learning_starts=4)
    tags = concurrently([store_op.for_each(lambda b: "S"), replay_op.for_each(lambda b: "R")])
    # S (2 rows) | R not ready -> S (4 rows) | R -> S | R ...
    assert tags.take(8) == ["S", "S", "R", "S", "R", "S", "R", "S"]
    assert tags.metrics.counters[keys.NUM_ENV_STEPS_REPLAYED] == 9


def test_local_replay_samples_with_a_beta_schedule() -> None:
    buf = PrioritizedReplayBuffer(16, alpha=0.6, beta=0.0, seed=0)
    buf.add(rows(*range(8)))
    buf.update_priorities(np.arange(8), np.arange(1.0, 9.0))
    beta = LinearSchedule(initial=1.0, final=1.0, steps=0)
    batch = next(replay(local_buffer=buf, num_items=5, beta=beta))
    assert batch.count == 5
    assert set(batch) >= {BATCH_INDEXES, WEIGHTS}
    assert np.all(batch[WEIGHTS] <= 1.0) and np.any(batch[WEIGHTS] < 1.0)  # beta=1, not 0


def test_replay_validates_arguments() -> None:
    buf = ReplayBuffer(4)
    with pytest.raises(ConfigError, match="num_items"):
        replay(local_buffer=buf, num_items=0)
    with pytest.raises(ConfigError, match="num_async"):
        replay(actors=["a"], num_async=0)
    with pytest.raises(ConfigError, match="learning_starts"):
        replay(local_buffer=buf, learning_starts=-1)
    with pytest.raises(ConfigError, match="beta"):
        replay(local_buffer=buf, beta=1.5)


def test_replay_from_actors_drops_nones_and_names_the_shard() -> None:
    actors = create_replay_actors(
        ReplayShardSpec(num_shards=2, capacity=100, learning_starts=4, num_items=3, seed=0)
    )
    flow.get(actors[1].add_batch.remote(rows(1, 2, 3)))
    flow.get(actors[1].add_batch.remote(rows(4, 5)))
    # Shard 0 stays below its learning_starts (2 per shard) and replays only Nones.
    out = replay(actors=actors, num_async=2).zip_with_source_actor().take(4)
    assert all(item.actor is actors[1] for item in out)
    assert all(isinstance(item.item, SampleBatch) and item.item.count == 3 for item in out)


# ------------------------------------------------------------------------------ priorities
def result_with_td(indexes: Any, td: Any) -> TrainResult:
    stats = {"loss": 1.0, keys.TD_ERROR: np.asarray(td), BATCH_INDEXES: np.asarray(indexes)}
    return TrainResult(len(td), {"default_policy": stats})


def test_update_priorities_on_a_local_buffer_and_strip_the_arrays() -> None:
    buf = PrioritizedReplayBuffer(8, alpha=1.0, beta=1.0, seed=0)
    buf.add(rows(*range(4)))
    item = result_with_td([0, 3], [-2.0, 0.0])
    out = flow.from_iterable([item]).for_each(UpdateReplayPriorities(local_buffer=buf)).take(1)
    assert out[0].stats == {"default_policy": {"loss": 1.0}}
    stats = buf.stats()
    assert stats["max_priority"] == pytest.approx(2.0 + 1e-6)
    # rows 1, 2 keep priority 1.0; row 0 is 2.0; row 3 is ~0
    assert stats["priority_sum"] == pytest.approx(4.0 + 2e-6)


def test_update_priorities_goes_to_the_source_shard() -> None:
    actors = create_replay_actors(
        ReplayShardSpec(
            num_shards=2, capacity=100, prioritized=True, alpha=1.0, beta=1.0, num_items=2, seed=0
        )
    )
    for a in actors:
        flow.get(a.add_batch.remote(rows(1, 2)))

    def fake_train(batch: SampleBatch) -> TrainResult:
        return result_with_td(batch[BATCH_INDEXES], np.full(batch.count, 9.0))

    op = replay(actors=actors, num_async=1).for_each(fake_train)
    op.for_each(UpdateReplayPriorities()).take(4)
    assert [flow.get(a.stats.remote())["max_priority"] for a in actors] == [9.0 + 1e-6] * 2


def test_update_priorities_with_actor_items_and_without_a_source() -> None:
    actors = create_replay_actors(
        ReplayShardSpec(num_shards=1, capacity=10, prioritized=True, alpha=1.0, beta=1.0, seed=0)
    )
    flow.get(actors[0].add_batch.remote(rows(1, 2)))
    op = UpdateReplayPriorities()
    item = ActorItem(actors[0], result_with_td([1], [5.0]))
    flow.from_iterable([item]).for_each(op).take(1)
    assert flow.get(actors[0].stats.remote())["max_priority"] == pytest.approx(5.0)
    with pytest.raises(PlanError, match="no replay shard is known"):
        flow.from_iterable([result_with_td([1], [5.0])]).for_each(op).take(1)
    with pytest.raises(PlanError, match="TrainResult"):
        flow.from_iterable([rows(1)]).for_each(op).take(1)
    with pytest.raises(ConfigError, match="epsilon"):
        UpdateReplayPriorities(epsilon=0)


# ------------------------------------------------------------------------------ target network
class FakePolicy:
    def __init__(self) -> None:
        self.updates = 0

    def update_target(self) -> None:
        self.updates += 1


class FakeLocalWorker:
    def __init__(self) -> None:
        self.policy_map: dict[str, Any] = {"default_policy": FakePolicy(), "other": object()}

    def get_policy(self, pid: str) -> Any:
        return self.policy_map[pid]


class FakeWorkers:
    def __init__(self) -> None:
        self.local = FakeLocalWorker()

    def local_worker(self) -> FakeLocalWorker:
        return self.local

    def learner_group(self) -> None:
        return None


@pytest.mark.parametrize("by_steps_trained", [False, True])
def test_update_target_network_every_freq_steps(by_steps_trained: bool) -> None:
    workers = FakeWorkers()
    counter = keys.NUM_ENV_STEPS_TRAINED if by_steps_trained else keys.NUM_ENV_STEPS_SAMPLED
    op = UpdateTargetNetwork(workers, 10, by_steps_trained=by_steps_trained)  # type: ignore[arg-type]
    stream = flow.from_iterable([rows(*range(4))] * 8).for_each(counting(counter)).for_each(op)
    policy = workers.local.policy_map["default_policy"]
    updates = []
    for _ in range(8):
        next(stream)
        updates.append(policy.updates)
    # Steps after each item: 4, 8, 12 (update), 16, 20, 24 (update), 28, 32
    assert updates == [0, 0, 1, 1, 1, 2, 2, 2]
    assert stream.metrics.counters[keys.NUM_TARGET_UPDATES] == 2
    assert stream.metrics.counters[keys.LAST_TARGET_UPDATE_TS] == 24


def test_update_target_network_validates() -> None:
    workers: Any = FakeWorkers()
    with pytest.raises(ConfigError, match="freq"):
        UpdateTargetNetwork(workers, -1)
    with pytest.raises(ConfigError, match="unknown policy"):
        UpdateTargetNetwork(workers, 1, policies=["nope"])
    with pytest.raises(ConfigError, match="no update_target"):
        UpdateTargetNetwork(workers, 1, policies=["other"])


def test_docstring_examples_run() -> None:
    import doctest
    import importlib

    replay_module = importlib.import_module("rlflow.ops.replay")  # the name is also a function
    result = doctest.testmod(replay_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_store_replay_and_priorities_through_shards(backend: str) -> None:
    """The Ape-X replay path on both backends: store -> replay(actors) -> priorities back."""
    actors = create_replay_actors(
        ReplayShardSpec(
            num_shards=2,
            capacity=200,
            prioritized=True,
            alpha=1.0,
            beta=1.0,
            learning_starts=8,
            num_items=4,
        )
    )
    store_op = flow.from_iterable([rows(*range(4)) for _ in range(50)]).for_each(
        StoreToReplayBuffer(actors=actors, seed=1)
    )

    def fake_train(batch: SampleBatch) -> TrainResult:
        return result_with_td(batch[BATCH_INDEXES], np.full(batch.count, 3.0))

    replay_op = replay(actors=actors, num_async=2).for_each(fake_train)
    update_op = replay_op.for_each(UpdateReplayPriorities())
    merged = concurrently([store_op, update_op], mode="async", output_indexes=[1])
    results = merged.take(10)
    assert all(r.stats == {"default_policy": {"loss": 1.0}} for r in results)
    counters = merged.metrics.counters
    assert counters[keys.NUM_ENV_STEPS_REPLAYED] >= 40
    # Every shard that replayed got its priorities back (fire-and-forget: ask after a round trip).
    stats = [flow.get(a.stats.remote()) for a in actors]
    assert any(s["max_priority"] == pytest.approx(3.0 + 1e-6) for s in stats)

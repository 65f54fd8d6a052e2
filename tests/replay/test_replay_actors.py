"""Replay actors on the local backend: learning_starts, shard tags, priorities, capacity split."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest

import rlflow.replay.actors as actors_module
from rlflow import flow
from rlflow.data.sample_batch import REWARDS, SampleBatch
from rlflow.errors import ConfigError
from rlflow.replay import (
    BATCH_INDEXES,
    SHARD_STRIDE,
    WEIGHTS,
    ReplayActor,
    ReplayShardSpec,
    create_replay_actors,
    split_shard_indexes,
)

pytestmark = pytest.mark.timeout(120)


def rows(start: int, count: int) -> SampleBatch:
    return SampleBatch({REWARDS: np.arange(start, start + count, dtype=np.float32)})


def test_gather_yields_none_until_learning_starts_then_full_batches(local_backend) -> None:
    actors = create_replay_actors(
        ReplayShardSpec(num_shards=2, capacity=20, learning_starts=6, num_items=5, seed=0)
    )
    replays = flow.from_actors(actors).gather_async()
    assert list(itertools.islice(replays, 6)) == [None] * 6
    flow.get(actors[0].add_batch.remote(rows(0, 3)))  # shard 0 reaches its 3
    flow.get(actors[1].add_batch.remote(rows(100, 2)))  # shard 1 stays below
    items = list(itertools.islice(replays, 12))
    batches = [b for b in items if b is not None]
    assert len(batches) >= 4 and all(b.count == 5 for b in batches)
    shards, slots = split_shard_indexes(np.concatenate([b[BATCH_INDEXES] for b in batches]))
    assert set(shards.tolist()) == {0} and slots.max() < 3
    flow.get(actors[1].add_batch.remote(rows(100, 1)))
    later = [b for b in itertools.islice(replays, 12) if b is not None]
    assert {int(b[BATCH_INDEXES][0] // SHARD_STRIDE) for b in later} == {0, 1}
    assert all((b[REWARDS] >= 100).all() for b in later if b[BATCH_INDEXES][0] >= SHARD_STRIDE)


def test_priorities_update_through_the_actor(local_backend) -> None:
    (actor,) = create_replay_actors(
        ReplayShardSpec(
            num_shards=1, capacity=4, prioritized=True, alpha=1.0, beta=1.0, num_items=200, seed=0
        )
    )
    flow.get(actor.add_batch.remote(rows(0, 4)))
    replays = flow.from_actors([actor]).gather_async()
    batch = next(replays)
    assert WEIGHTS in batch and (batch[WEIGHTS] == 1.0).all()
    flow.get(actor.update_priorities.remote(np.array([0, 1, 2, 3]), np.array([1.0, 1, 1, 7])))
    next(replays)  # requested before the update
    idx = np.concatenate([next(replays)[BATCH_INDEXES] for _ in range(20)])
    assert np.mean(idx == 3) == pytest.approx(0.7, abs=0.03)
    assert flow.get(actor.stats.remote())["max_priority"] == 7.0
    with pytest.raises(ConfigError, match="belongs to shard 1"):
        flow.get(actor.update_priorities.remote([SHARD_STRIDE + 1], [1.0]))


def test_uniform_shard_ignores_priorities_and_reports_stats(local_backend) -> None:
    (actor,) = create_replay_actors(ReplayShardSpec(num_shards=1, capacity=8, num_items=2))
    flow.get(actor.add_batch.remote(rows(0, 3).as_multi_agent()))
    flow.get(actor.update_priorities.remote([0], [5.0]))
    stats = flow.get(actor.stats.remote())
    assert stats["size"] == 3 and stats["capacity"] == 8 and stats["shard_index"] == 0


def test_capacity_and_learning_starts_are_split_across_shards(local_backend) -> None:
    actors = create_replay_actors(
        ReplayShardSpec(num_shards=3, capacity=10, learning_starts=7, seed=5)
    )
    stats = [flow.get(a.stats.remote()) for a in actors]
    assert [s["capacity"] for s in stats] == [4, 3, 3]
    assert [s["learning_starts"] for s in stats] == [3, 3, 3]
    assert [s["shard_index"] for s in stats] == [0, 1, 2]


def test_state_round_trip_through_actors(local_backend) -> None:
    spec = ReplayShardSpec(num_shards=1, capacity=5, prioritized=True, alpha=0.5, beta=0.5, seed=1)
    a, b = (ReplayActor(spec) for _ in range(2))
    a.add_batch(rows(0, 7))
    b.set_state(a.get_state())
    assert a.stats() == b.stats()


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        (dict(num_shards=0, capacity=10), "num_shards=0"),
        (dict(num_shards=4, capacity=3), "capacity=3 must be >= num_shards=4"),
        (dict(num_shards=1, capacity=3, learning_starts=-1), "learning_starts=-1"),
        (dict(num_shards=1, capacity=3, num_items=0), "num_items=0"),
        (dict(num_shards=1, capacity=3, prioritized=True, alpha=2.0), "alpha=2.0"),
    ],
)
def test_bad_arguments_fail_before_any_actor_starts(local_backend, kwargs, text) -> None:
    with pytest.raises(ConfigError, match=text):
        create_replay_actors(ReplayShardSpec(**kwargs))


def test_add_batch_rejects_multi_policy_batches(local_backend) -> None:
    actor = ReplayActor(ReplayShardSpec(num_shards=1, capacity=4))
    two = SampleBatch.concat_samples([rows(0, 1).as_multi_agent()])
    two.policy_batches["other"] = rows(0, 1)
    with pytest.raises(ConfigError, match="single-agent"):
        actor.add_batch(two)


def test_docstring_examples_run(local_backend) -> None:
    result = doctest.testmod(actors_module)
    assert result.failed == 0 and result.attempted > 0


def test_a_spec_gives_each_shard_its_shares() -> None:
    spec = ReplayShardSpec(num_shards=3, capacity=10, learning_starts=7, seed=5)
    assert [spec.shard_capacity(i) for i in range(3)] == [4, 3, 3]
    assert spec.shard_learning_starts == 3
    assert [spec.shard_seed(i) for i in range(3)] == [5, 6, 7]
    assert ReplayShardSpec(num_shards=2, capacity=4).shard_seed(1) is None


def test_an_actor_takes_a_spec_and_one_of_its_shard_indexes(local_backend) -> None:
    spec = ReplayShardSpec(num_shards=2, capacity=5)
    assert ReplayActor(spec, 1).stats()["capacity"] == 2
    with pytest.raises(ConfigError, match=r"shard_index=2 must be an integer in \[0, 1\]"):
        ReplayActor(spec, 2)
    with pytest.raises(ConfigError, match="ReplayActor\\(spec\\)=5 must be a ReplayShardSpec"):
        ReplayActor(5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="prioritized=1"):
        ReplayShardSpec(num_shards=1, capacity=3, prioritized=1)  # type: ignore[arg-type]

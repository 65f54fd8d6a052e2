"""Replay shards that die are started again empty: local backend, exact counts.

A shard is killed with ``flow.kill`` (its later calls fail with ``ActorDiedError``); storing,
replaying and priority updates go on with the shard of the same index started again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlflow import Trainer, flow
from rlflow.data import OBS, REWARDS, SampleBatch
from rlflow.errors import ActorDiedError
from rlflow.flow import ActorItem
from rlflow.ops import StoreToReplayBuffer, UpdateReplayPriorities, keys, replay
from rlflow.ops.train import TrainResult
from rlflow.replay import BATCH_INDEXES, ReplayShardSpec, create_replay_actors, replay_buffers
from rlflow.replay.shards import ReplayShardTable, as_shard_table, create_replay_shards
from rlflow.testing.envs import CountingEnv

pytestmark = pytest.mark.timeout(120)

PRIO: dict[str, Any] = dict(prioritized=True, alpha=1.0, beta=1.0, seed=0)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def rows(*values: float) -> SampleBatch:
    return SampleBatch({OBS: np.array(values, dtype=np.float32), REWARDS: np.ones(len(values))})


def stats(actor: Any) -> dict[str, float]:
    return flow.get(actor.stats.remote())  # type: ignore[no-any-return]


def result_with_td(indexes: Any, td: Any) -> TrainResult:
    info: dict[str, Any] = {
        "loss": 1.0,
        keys.TD_ERROR: np.asarray(td),
        BATCH_INDEXES: np.asarray(indexes),
    }
    return TrainResult(len(td), {"default_policy": info})


def test_a_dead_shard_is_started_again_empty_with_the_same_index_and_shares() -> None:
    table = create_replay_shards(
        ReplayShardSpec(num_shards=3, capacity=100, learning_starts=10, num_items=2, **PRIO)
    )
    old = table.actors[2]
    flow.get(old.add_batch.remote(rows(1, 2, 3)))
    before = stats(old)
    flow.kill(old)
    new = table.replace(2, old, ActorDiedError("gone"))
    assert table.actors[2] is new and table.num_restarts == 1
    after = stats(new)
    assert after["size"] == 0 and before["size"] == 3
    same = ("capacity", "shard_index", "learning_starts", "beta")
    assert {k: after[k] for k in same} == {k: before[k] for k in same}
    assert table.replace(2, old) is new and table.num_restarts == 1  # asked again: same shard
    assert table.index_of(old) is None and table.index_of(new) == 2


def test_a_plain_list_of_actors_is_not_recovered_and_the_error_names_the_shard() -> None:
    actors = create_replay_actors(ReplayShardSpec(num_shards=2, capacity=100, seed=0))
    table = as_shard_table(actors)
    assert not table.recovers and as_shard_table(table) is table
    flow.kill(actors[1])
    with pytest.raises(ActorDiedError, match="replay shard 1 of 2"):
        table.replace(1, actors[1])
    store = StoreToReplayBuffer(actors=actors, seed=0)
    with pytest.raises(ActorDiedError, match="replay shard 1 of 2"):
        flow.from_iterable([rows(1)] * 20).for_each(store).take(20)


def test_store_starts_a_dead_shard_again_and_counts_it_once() -> None:
    table = create_replay_shards(ReplayShardSpec(num_shards=2, capacity=100, seed=0))
    dead = table.actors[1]
    flow.kill(dead)
    store = StoreToReplayBuffer(actors=table, seed=0)
    op = flow.from_iterable([rows(1)] * 40).for_each(store)
    op.take(40)
    assert op.metrics.counters[keys.NUM_REPLAY_SHARD_RESTARTS] == 1
    assert table.num_restarts == 1 and table.actors[1] is not dead
    # Only the adds sent to the dead actor were lost; the new shard got the later ones.
    assert stats(table.actors[0])["size"] + stats(table.actors[1])["size"] == 39


def test_replay_reads_the_new_shard_and_store_and_replay_agree_on_it() -> None:
    table = create_replay_shards(
        ReplayShardSpec(num_shards=2, capacity=100, learning_starts=4, num_items=2, seed=0)
    )
    for actor in table.actors:
        flow.get(actor.add_batch.remote(rows(1, 2)))
    replays = replay(actors=table, num_async=1).zip_with_source_actor()
    assert {item.actor for item in replays.take(4)} == set(table.actors)
    dead = table.actors[0]
    flow.kill(dead)
    new_source = [item.actor for item in replays.take(4)]
    # A request answered before the kill may still come; then only the live shard (the new
    # one is empty: NOT_READY).
    assert dead not in new_source[1:] and set(new_source[1:]) == {table.actors[1]}
    new = table.actors[0]
    assert new is not dead
    store = StoreToReplayBuffer(actors=table, seed=0)  # store asks about the same dead actor
    flow.from_iterable([rows(5, 6)] * 6).for_each(store).take(6)
    assert stats(new)["size"] > 0
    assert new in {item.actor for item in replays.take(8)}
    assert replays.metrics.counters[keys.NUM_REPLAY_SHARD_RESTARTS] == 1
    assert table.num_restarts == 1


def test_priority_updates_for_a_replaced_shards_rows_are_dropped() -> None:
    table = create_replay_shards(ReplayShardSpec(num_shards=2, capacity=100, num_items=2, **PRIO))
    for actor in table.actors:
        flow.get(actor.add_batch.remote(rows(1, 2)))
    sampled = {
        item.actor: item.item for item in replay(actors=table).zip_with_source_actor().take(4)
    }
    old = table.actors[1]
    flow.kill(old)
    new = table.replace(1, old)
    flow.get(new.add_batch.remote(rows(3, 4)))
    op = UpdateReplayPriorities(actors=table)
    items = [
        ActorItem(a, result_with_td(b[BATCH_INDEXES], np.full(b.count, 7.0)))
        for a, b in sampled.items()
    ]
    out = flow.from_iterable(items).for_each(op).take(2)
    assert all(BATCH_INDEXES not in r.item.stats["default_policy"] for r in out)
    assert stats(table.actors[0])["max_priority"] == pytest.approx(7.0)
    assert stats(new)["max_priority"] == pytest.approx(1.0)  # old shard's rows never reach it


def test_table_needs_a_shard() -> None:
    with pytest.raises(Exception, match="at least one replay shard"):
        ReplayShardTable([])


def test_apex_goes_on_after_a_replay_shard_dies() -> None:
    fields: dict[str, Any] = {
        "env": CountingEnv,
        "env_config": {"episode_len": 5},
        "num_workers": 2,
        "num_envs_per_worker": 2,
        "rollout_fragment_length": 4,
        "train_batch_size": 8,
        "buffer_size": 256,
        "learning_starts": 16,
        "num_replay_buffer_shards": 2,
        "max_weight_sync_delay": 16,
        "target_network_update_freq": 64,
        "min_time_s_per_iteration": 0.0,  # 1,000-step iterations (DQN's), not 1 s ones
    }
    with Trainer("apex", backend="local", seed=0, **fields) as trainer:
        before = [trainer.train() for _ in range(2)][-1]
        shards: Any = replay_buffers(trainer.workers)["replay_shards"]
        dead = shards.shards[1]
        flow.kill(dead)
        results = [trainer.train() for _ in range(4)]
        assert shards.shards[1] is not dead
    assert before[keys.NUM_REPLAY_SHARD_RESTARTS] == 0
    assert results[-1][keys.NUM_REPLAY_SHARD_RESTARTS] == 1
    replayed = [r["counters"][keys.NUM_ENV_STEPS_REPLAYED] for r in [before, *results]]
    assert replayed == sorted(set(replayed))  # strictly increasing

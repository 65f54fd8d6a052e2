"""SIGKILL of a replay shard's process during an Ape-X run on Ray: the run goes on.

The shard's pid is read on it (``__ray_call__``); after the kill the shard of the same index is
started again empty. With ``-s`` the test prints the seconds from the kill to the first result
(which replayed more) and to the new shard's first replay, and the rows the dead shard held (lost
with it). A batch stored by reference whose rollout worker died before its shard read it is
dropped, and the shard lives (local backend: the error as the Ray backend gives it).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from rlflow import Trainer, flow
from rlflow.data.refs import BatchRef
from rlflow.errors import ObjectLostError
from rlflow.ops import StoreToReplayBuffer, keys
from rlflow.replay import replay_buffers
from rlflow.replay.shards import ReplayShardTable

pytestmark = pytest.mark.timeout(400)

SMALL: dict[str, Any] = {
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 25,
    "train_batch_size": 32,
    "buffer_size": 2000,
    "learning_starts": 100,
    "num_replay_buffer_shards": 2,
    "max_weight_sync_delay": 100,
    "target_network_update_freq": 500,
    "min_steps_per_iteration": 200,
    "min_time_s_per_iteration": 0.0,
}
"""A few hundred env steps per iteration (not Ape-X's 1 s), two shards."""

RESTARTS = keys.NUM_REPLAY_SHARD_RESTARTS
REPLAYED = keys.NUM_ENV_STEPS_REPLAYED


def sigkill(handle: Any) -> int:
    """Kill the process of the replay shard ``handle``; its pid."""
    pid = int(flow.get(handle.__ray_call__.remote(lambda _shard: os.getpid())))
    os.kill(pid, signal.SIGKILL)
    return pid


@pytest.mark.ray
def test_a_killed_replay_shard_is_started_again_and_apex_goes_on(ray_backend: None) -> None:
    with Trainer("apex", env="CartPole-v1", seed=0, backend="ray", **SMALL) as trainer:
        before = [trainer.train() for _ in range(3)][-1]
        assert before[RESTARTS] == 0 and before["counters"][REPLAYED] > 0
        shards: Any = replay_buffers(trainer.workers)["replay_shards"]
        victim = shards.shards[1]
        held = int(flow.get(victim.stats.remote())["size"])
        sigkill(victim)
        killed_at = time.perf_counter()
        results = [trainer.train()]
        replayed_s = time.perf_counter() - killed_at
        results += [trainer.train() for _ in range(3)]
        new = shards.shards[1]
        assert new != victim
        assert flow.get(new.stats.remote())["shard_index"] == 1
        while flow.get(new.stats.remote())["num_sampled"] == 0:  # it replays once it is full
            assert time.perf_counter() - killed_at < 120
            results.append(trainer.train())
        new_shard_s = time.perf_counter() - killed_at
    assert [r[RESTARTS] for r in results[-2:]] == [1, 1]
    replayed = [r["counters"][REPLAYED] for r in [before, *results]]
    assert replayed == sorted(set(replayed))  # strictly increasing
    print(
        f"\nkill -> next result (more replayed) {replayed_s:.2f}s, -> new shard replays "
        f"{new_shard_s:.2f}s; rows held by the dead shard (lost): {held}"
    )


class _ShardFetchingALostBatch:
    """A replay shard whose ``add_batch`` meets a lost argument, as Ray reports it to the store
    (the Ray backend's `ObjectLostError`, see ``tests/flow/test_flow_errors.py``)."""

    def __init__(self) -> None:
        self.added = 0

    def add_batch(self, batch: Any) -> None:
        if batch is None:
            raise ObjectLostError("an object is lost from the store: its owner died")
        self.added += 1

    def count(self) -> int:
        return self.added


def test_a_batch_lost_with_its_rollout_worker_is_dropped_and_the_shard_lives(
    local_backend: None,
) -> None:
    """With learner actors Ape-X stores batches by reference: the shard fetches each from the
    worker that sampled it. A worker killed before its batch was fetched made the shard's
    ``add_batch`` fail with Ray's OwnerDiedError, which ended the run (found by
    ``benchmarks/soak.py``); the batch is dropped, and the shard is neither dead nor replaced."""
    shard = flow.remote(_ShardFetchingALostBatch).remote()
    started: list[int] = []
    table = ReplayShardTable([shard], start=lambda i: started.append(i))
    store = StoreToReplayBuffer(actors=table)
    lost = BatchRef(None, 3, 3, 3)  # what the shard is given: a reference it cannot resolve
    kept = BatchRef(object(), 3, 3, 3)
    assert flow.from_iterable([lost, kept, kept]).for_each(store).take(3) == [lost, kept, kept]
    while store._pending:  # settle the adds (the first one raised ObjectLostError here)
        store._settle(*store._pending.pop(0))
    assert table.actors == [shard] and table.num_restarts == 0 and started == []
    assert flow.get(shard.count.remote()) == 2

"""SIGKILL of a replay shard's process during an Ape-X run on Ray: the run goes on.

The shard's pid is read on it (``__ray_call__``); after the kill the shard of the same index is
started again empty. With ``-s`` the test prints the seconds from the kill to the first result
(which replayed more) and to the new shard's first replay, and the rows the dead shard held (lost
with it). A batch stored by reference whose rollout worker died before its shard read it is
dropped, and the shard lives.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from rlflow import Trainer, flow
from rlflow.ops import keys
from rlflow.replay import replay_buffers

pytestmark = [pytest.mark.ray, pytest.mark.timeout(400)]

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


class _Holder:
    """Stores a batch in its own object store (as a rollout worker does), then can die."""

    def store(self, batch: Any) -> Any:
        from rlflow.data.refs import store_batch

        return store_batch(batch)


def test_a_batch_lost_with_its_rollout_worker_is_dropped_and_the_shard_lives(
    ray_backend: None,
) -> None:
    """With learner actors Ape-X stores batches by reference: the shard fetches each from the
    worker that sampled it. A worker killed before its batch was fetched made the shard's
    ``add_batch`` fail with Ray's OwnerDiedError, which ended the run (found by
    ``benchmarks/soak.py``); the batch is dropped, and the shard is neither dead nor replaced."""
    import ray

    from rlflow.data import SampleBatch
    from rlflow.errors import ActorDiedError
    from rlflow.ops import StoreToReplayBuffer
    from rlflow.replay import ReplayShardSpec
    from rlflow.replay.shards import create_replay_shards

    table = create_replay_shards(
        ReplayShardSpec(num_shards=1, capacity=100, learning_starts=0, num_items=2, seed=0)
    )
    store = StoreToReplayBuffer(actors=table)
    batch = SampleBatch({"obs": [[0.0], [1.0], [2.0]], "rewards": [1.0, 1.0, 1.0]})
    holder = flow.remote(_Holder).options(num_cpus=0).remote()
    lost = flow.get(holder.store.remote(batch), timeout=60)
    ray.kill(holder)
    with pytest.raises(ActorDiedError):  # dead now (ray.kill does not wait)
        flow.get(holder.store.remote(batch), timeout=60)
    shard = table.actors[0]
    items = flow.from_iterable([lost, batch]).for_each(store)
    assert len(items.take(2)) == 2
    while store._pending:  # wait for both adds (the lost one raised OwnerDiedError here)
        store._settle(*store._pending.pop(0))
    assert table.actors[0] is shard and table.num_restarts == 0
    assert flow.get(shard.stats.remote(), timeout=60)["size"] == 3  # the kept batch only
    flow.kill(shard)

"""MultiAgentReplayBuffer and the replay ops over it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlflow import flow
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data import OBS, REWARDS, MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError
from rlflow.ops import (
    StoreToReplayBuffer,
    TrainResult,
    UpdateReplayPriorities,
    keys,
    replay,
)
from rlflow.replay import (
    BATCH_INDEXES,
    WEIGHTS,
    MultiAgentReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def rows(*values: float) -> SampleBatch:
    return SampleBatch({OBS: np.array(values, dtype=np.float32), REWARDS: np.ones(len(values))})


def two_policies(p0: list[float], p1: list[float], env_steps: int | None = None) -> MultiAgentBatch:
    batches = {"p0": rows(*p0), "p1": rows(*p1)}
    return MultiAgentBatch(batches, max(len(p0), len(p1)) if env_steps is None else env_steps)


def uniform(capacity: int = 100) -> MultiAgentReplayBuffer:
    return MultiAgentReplayBuffer(lambda: ReplayBuffer(capacity, seed=0))


def prioritized(capacity: int = 16) -> MultiAgentReplayBuffer:
    return MultiAgentReplayBuffer(
        lambda: PrioritizedReplayBuffer(capacity, alpha=1.0, beta=1.0, seed=0)
    )


# ------------------------------------------------------------------------------ the buffer
def test_add_splits_by_policy_and_len_is_the_smallest() -> None:
    buf = uniform()
    assert len(buf) == 0 and buf.num_added == 0 and buf.buffers == {}
    buf.add(two_policies([0, 1, 2, 3, 4], [100, 101]))
    assert {pid: len(b) for pid, b in buf.buffers.items()} == {"p0": 5, "p1": 2}
    assert len(buf) == 2 and buf.num_added == 2
    buf.add(MultiAgentBatch({"p1": rows(102, 103, 104, 105), "p2": rows()}, 4))
    assert "p2" not in buf.buffers  # an empty part makes no buffer
    assert len(buf) == 5 and buf.num_added == 5
    single = uniform()
    single.add(rows(7, 8))
    assert list(single.buffers) == [DEFAULT_POLICY_ID] and len(single) == 2


def test_sample_draws_each_policys_rows_from_its_own_buffer() -> None:
    buf = uniform()
    with pytest.raises(ConfigError, match="the buffer is empty; add first"):
        buf.sample(3)
    buf.add(two_policies([0, 1, 2, 3, 4], [100, 101]))
    out = buf.sample(6)
    assert isinstance(out, MultiAgentBatch)
    assert out.count == out.env_steps() == 6 and out.agent_steps() == 12
    p0, p1 = out.policy_batches["p0"], out.policy_batches["p1"]
    assert set(p0[OBS].tolist()) <= {0, 1, 2, 3, 4}
    assert set(p1[OBS].tolist()) <= {100, 101}
    # Each row is the one stored in the slot its index names.
    assert (p0[OBS] == p0[BATCH_INDEXES]).all()
    assert (p1[OBS] == 100 + p1[BATCH_INDEXES]).all()


def test_num_added_counts_evicted_rows() -> None:
    buf = uniform(capacity=4)
    buf.add(two_policies([0, 1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15, 16]))
    assert len(buf) == 4
    assert buf.num_added == 6
    assert buf.buffers["p1"].num_added == 7


def test_update_priorities_reach_only_that_policys_buffer() -> None:
    buf = prioritized()
    assert not buf.prioritized  # nothing made yet
    buf.add(two_policies([0, 1, 2, 3], [10, 11, 12, 13]))
    assert buf.prioritized
    buf.update_priorities([0, 1, 2], [1e-9, 1e-9, 1e-9], policy_id="p0")
    stats = buf.stats()
    assert stats["p0"]["priority_sum"] == pytest.approx(1.0, abs=1e-6)  # row 3 keeps 1.0
    assert stats["p1"]["priority_sum"] == pytest.approx(4.0)
    out = buf.sample(20, beta=1.0)
    assert (out.policy_batches["p0"][OBS] == 3).all()
    assert len(set(out.policy_batches["p1"][OBS].tolist())) > 1
    assert WEIGHTS in out.policy_batches["p1"]
    with pytest.raises(ConfigError, match=r"no buffer for policy 'p9'.*\['p0', 'p1'\]"):
        buf.update_priorities([0], [1.0], policy_id="p9")
    plain = uniform()
    plain.add(two_policies([0], [1]))
    plain.update_priorities([0], [5.0], policy_id="p0")  # uniform: ignored
    assert not plain.prioritized


def test_state_round_trip_resumes_the_same_samples() -> None:
    buf = prioritized()
    buf.add(two_policies([0, 1, 2, 3, 4, 5], [10, 11, 12]))
    buf.update_priorities([1, 2], [3.0, 0.5], policy_id="p0")
    buf.sample(4)
    state = buf.get_state()
    expected = [buf.sample(5), buf.sample(5)]
    restored = prioritized()
    restored.set_state(state)
    assert len(restored) == 3 and restored.num_added == 3
    for want in expected:
        got = restored.sample(5)
        for pid in ("p0", "p1"):
            for column in (OBS, BATCH_INDEXES, WEIGHTS):
                np.testing.assert_array_equal(
                    got.policy_batches[pid][column], want.policy_batches[pid][column]
                )


def test_bad_factories_are_rejected() -> None:
    with pytest.raises(ConfigError, match="must be a zero-argument function"):
        MultiAgentReplayBuffer(ReplayBuffer(4))  # type: ignore[arg-type]
    buf = MultiAgentReplayBuffer(lambda: [])  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigError, match=r"make_buffer\(\) returned \[\], not a ReplayBuffer"):
        buf.add(rows(1))


# ------------------------------------------------------------------------------ the ops
def test_store_and_replay_ops_take_a_multi_agent_buffer() -> None:
    buf = prioritized()
    batches = [two_policies([0, 1], [10, 11, 12], env_steps=3)]
    stored = flow.from_iterable(batches).for_each(StoreToReplayBuffer(local_buffer=buf))
    assert stored.take(1) == batches
    assert stored.metrics.counters[keys.NUM_ENV_STEPS_STORED] == 3
    assert {pid: len(b) for pid, b in buf.buffers.items()} == {"p0": 2, "p1": 3}
    out = next(replay(local_buffer=buf, num_items=4, beta=0.5))
    assert isinstance(out, MultiAgentBatch) and out.count == 4
    assert all(WEIGHTS in pb for pb in out.policy_batches.values())


def test_update_priorities_op_routes_td_errors_per_policy() -> None:
    buf = prioritized()
    buf.add(two_policies([0, 1, 2, 3], [10, 11, 12, 13]))

    def td(indexes: list[int], errors: list[float]) -> dict[str, Any]:
        return {"loss": 1.0, keys.TD_ERROR: np.array(errors), BATCH_INDEXES: np.array(indexes)}

    item = TrainResult(4, {"p0": td([0, 1], [-3.0, 0.0]), "p1": td([2], [5.0])})
    op = UpdateReplayPriorities(local_buffer=buf, epsilon=1e-6)
    out = flow.from_iterable([item]).for_each(op).take(1)
    assert out[0].stats == {"p0": {"loss": 1.0}, "p1": {"loss": 1.0}}
    stats = buf.stats()
    assert stats["p0"]["priority_sum"] == pytest.approx(3.0 + 1e-6 + 1.0 + 1.0, abs=1e-5)
    assert stats["p1"]["priority_sum"] == pytest.approx(1.0 + 1.0 + 5.0 + 1.0, abs=1e-5)

"""Tests for rlflow.learner.staging and the learner's prefetch: one packed copy per batch, the
same numbers as column-by-column conversion, batches staged ahead by a loader thread. The CUDA
paths run here with device = cpu (packing without pinning); `tests/policy/test_devices.py` runs
them on a GPU."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
import torch

from rlflow.algorithms import IMPALAConfig, PPOConfig, get_algorithm
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data.sample_batch import SEQ_START, SampleBatch
from rlflow.errors import ConfigError
from rlflow.learner.staging import HostStaging, StagedBatch
from rlflow.ops import dequeue
from rlflow.ops.learner_thread import LearnerThread
from rlflow.policy.policy import weights_to_host
from rlflow.testing.workers import COUNTING_DEFAULTS
from rlflow.workers import RolloutWorker

pytestmark = pytest.mark.timeout(120)

CPU = torch.device("cpu")


def _columns(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    obs = rng.integers(0, 255, (n, 3, 4), dtype=np.uint8)
    frozen = rng.normal(size=n).astype(np.float32)
    frozen.flags.writeable = False  # as Ray hands out arrays
    return {
        "obs": obs,
        "r": rng.normal(size=n).astype(np.float32),
        "frozen": frozen,
        "a": rng.integers(0, 5, n).astype(np.int64),
        "done": rng.uniform(size=n) > 0.5,
        "strided": rng.normal(size=(n, 4)).astype(np.float32)[:, ::2],
        "odd": rng.integers(0, 9, (n, 3)).astype(np.int16),
    }


@pytest.mark.parametrize("threads", [1, 3])
def test_large_columns_are_copied_in_pieces_byte_for_byte(threads: int) -> None:
    staging = HostStaging(CPU, copy_threads=threads)
    rng = np.random.default_rng(1)
    # 3 x 4 MiB + 5 bytes: cut into 3 uneven pieces with 3 threads; the small columns stay whole
    big = rng.integers(0, 255, 3 * (4 << 20) + 5, dtype=np.uint8)
    columns = {"small": rng.normal(size=9).astype(np.float32), "big": big, "empty": big[:0]}
    pieces = staging._pieces(torch.empty(big.nbytes, dtype=torch.uint8), 0, torch.from_numpy(big))
    assert len(pieces) == threads and sum(src.numel() for _, src in pieces) == big.nbytes
    for _ in range(2):
        out = staging.to_device(columns)
        for name, array in columns.items():
            np.testing.assert_array_equal(out[name].numpy(), array, err_msg=name)


def test_copy_threads_must_be_a_positive_int() -> None:
    with pytest.raises(ValueError, match=r"copy_threads=0 must be an int >= 1"):
        HostStaging(CPU, copy_threads=0)


def test_one_buffer_holds_every_column_and_keeps_dtypes_and_shapes() -> None:
    staging = HostStaging(CPU)
    assert not staging.pin  # pinned only for CUDA
    rng = np.random.default_rng(0)
    first = _columns(rng, 7)
    out = staging.to_device(first)
    for name, array in first.items():
        assert out[name].dtype == torch.from_numpy(array.copy()).dtype, name
        np.testing.assert_array_equal(out[name].numpy(), array, err_msg=name)
    capacity = staging.capacity_bytes
    # The buffers are reused (two in turn), and earlier outputs are never overwritten.
    for _ in range(4):
        again = _columns(rng, 7)
        out2 = staging.to_device(again)
        np.testing.assert_array_equal(out2["obs"].numpy(), again["obs"])
    np.testing.assert_array_equal(out["obs"].numpy(), first["obs"])
    assert staging.capacity_bytes == capacity * 2 or staging.capacity_bytes == capacity
    bigger = staging.to_device(_columns(rng, 300))
    assert bigger["obs"].shape == (300, 3, 4) and staging.capacity_bytes > capacity
    assert staging.to_device({"empty": np.zeros((0, 2), np.float32)})["empty"].shape == (0, 2)


def _policy_pair(algo: str, config: Any) -> tuple[Any, Any, SampleBatch]:
    spec = get_algorithm(algo)
    batch = RolloutWorker(config, spec.policy_cls, worker_index=1).sample()
    plain = RolloutWorker(config, spec.policy_cls, worker_index=0).get_policy()
    staged = RolloutWorker(config, spec.policy_cls, worker_index=0).get_policy()
    staged.update.staging = HostStaging(CPU)  # the accelerator path, on CPU
    return plain, staged, batch


@pytest.mark.parametrize(
    ("algo", "config"),
    [
        ("impala", IMPALAConfig(**{**COUNTING_DEFAULTS, "num_envs_per_worker": 2})),
        ("ppo", PPOConfig(**COUNTING_DEFAULTS, train_batch_size=16, sgd_minibatch_size=8)),
    ],
)
def test_staged_conversion_learns_exactly_as_column_by_column(algo: str, config: Any) -> None:
    plain, staged, batch = _policy_pair(algo, config)
    for _ in range(2):
        want, got = plain.update.learn_on_batch(batch), staged.update.learn_on_batch(batch)
        assert got == want
    for name, value in plain.get_weights().items():
        np.testing.assert_array_equal(staged.get_weights()[name], value)


def test_a_staged_batch_serves_its_policy_only() -> None:
    config = IMPALAConfig(**COUNTING_DEFAULTS)
    plain, other, batch = _policy_pair("impala", config)
    staged = plain.update.stage(batch)
    assert isinstance(staged, StagedBatch) and staged.count == batch.count
    assert plain.update.batch_to_tensors(staged) is staged.tensors
    assert other.update.batch_to_tensors(staged) is not staged.tensors  # converts for itself
    assert type(staged.slice(0, staged.count)) is SampleBatch
    assert plain.update.learn_on_batch(staged) == other.update.learn_on_batch(batch)


def test_prefetching_learner_trains_every_batch_in_order_with_the_same_numbers() -> None:
    config = IMPALAConfig(**{**COUNTING_DEFAULTS, "num_envs_per_worker": 2})
    spec = get_algorithm("impala")
    sampler = RolloutWorker(config, spec.policy_cls, worker_index=1)
    batches = [sampler.sample() for _ in range(4)]
    results = {}
    for prefetch in (False, True):
        local = RolloutWorker(config, spec.policy_cls, worker_index=0)
        learner = LearnerThread(local, prefetch=prefetch)
        assert learner.prefetch is prefetch
        learner.start()
        try:
            for batch in batches:
                learner.inqueue.put(batch)
            out = dequeue(learner.outqueue, check=learner.check)
            results[prefetch] = [next(out) for _ in batches]
        finally:
            learner.stop()
        assert not learner._loader.is_alive()
    assert results[True] == results[False]
    assert [r.env_steps for r in results[True]] == [b.env_steps() for b in batches]
    # A CPU learner does not prefetch unless asked.
    assert not LearnerThread(RolloutWorker(config, spec.policy_cls, worker_index=0)).prefetch


def test_a_loader_crash_surfaces_in_the_plan() -> None:
    local = RolloutWorker(
        IMPALAConfig(**COUNTING_DEFAULTS), get_algorithm("impala").policy_cls, worker_index=0
    )
    learner = LearnerThread(local, prefetch=True)
    learner.start()
    try:
        # A sequence no bootstrap row closes: staging it for V-trace fails.
        learner.inqueue.put(SampleBatch({"x": [1.0], SEQ_START: [True]}))
        deadline = time.monotonic() + 30
        with pytest.raises(ConfigError, match="closed by a bootstrap row") as info:
            while time.monotonic() < deadline:  # check() raises once the loader has failed
                learner.check()
                time.sleep(0.01)
        assert "rlflow-learner-loader" in "".join(getattr(info.value, "__notes__", []))
    finally:
        learner.stop()
    assert DEFAULT_POLICY_ID in local.policy_map


@pytest.mark.parametrize("algo", ["impala", "sac"])
def test_a_weights_snapshot_is_a_copy_the_learner_can_keep_training_past(algo: str) -> None:
    spec = get_algorithm(algo)
    env = {"env": "Pendulum-v1"} if algo == "sac" else {"env": COUNTING_DEFAULTS["env"]}
    policy = RolloutWorker(spec.config_cls(**env), spec.policy_cls, worker_index=0).get_policy()
    snapshot = policy.weights_snapshot()
    before = policy.get_weights()
    assert sorted(snapshot) == sorted(before)  # SAC: the actor's weights only
    with torch.no_grad():
        for p in policy.weights_module.parameters():
            p.add_(1.0)  # an update after the snapshot
    host = weights_to_host(snapshot)
    for name, value in before.items():
        np.testing.assert_array_equal(host[name], value)
    assert any(not np.array_equal(policy.get_weights()[k], before[k]) for k in before)


def test_the_loader_stages_one_batch_ahead_of_the_learner() -> None:
    config = IMPALAConfig(**COUNTING_DEFAULTS)
    spec = get_algorithm("impala")
    batch = RolloutWorker(config, spec.policy_cls, worker_index=1).sample()
    learner = LearnerThread(RolloutWorker(config, spec.policy_cls, worker_index=0), prefetch=True)
    learner.lock.acquire()  # the learner blocks in its first update
    learner.start()
    try:
        for _ in range(4):
            learner.inqueue.put(batch)
        deadline = time.monotonic() + 30
        while learner._staged.qsize() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # a loader that staged more would have taken another by now
        # One batch in training, one staged, the other two still in the queue.
        assert learner._staged.qsize() == 1 and learner.inqueue.qsize() == 2
    finally:
        learner.lock.release()
    try:
        out = dequeue(learner.outqueue, check=learner.check)
        assert [next(out).env_steps for _ in range(4)] == [batch.env_steps()] * 4
    finally:
        learner.stop()


@pytest.mark.parametrize("algo", ["ppo", "impala"])
def test_minibatch_sgd_brings_its_stats_to_the_host_once(
    algo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rlflow.learner.update as update_module

    spec = get_algorithm(algo)
    config = spec.config_cls(**{**COUNTING_DEFAULTS, "num_envs_per_worker": 4})
    batch = RolloutWorker(config, spec.policy_cls, worker_index=1).sample()
    policy = RolloutWorker(config, spec.policy_cls, worker_index=0).get_policy()
    calls: list[int] = []
    real = update_module.stats_to_host

    def counting(stats: Any) -> Any:
        calls.append(len(stats))
        return real(stats)

    monkeypatch.setattr(update_module, "stats_to_host", counting)
    stats = policy.update.learn_on_minibatches(
        batch, num_sgd_iter=3, sgd_minibatch_size=4, rng=np.random.default_rng(0)
    )
    assert stats["num_steps"] >= 6 and len(calls) == 1
    assert all(type(v) is float for k, v in stats.items())

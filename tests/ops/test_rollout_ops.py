"""Rollout operators on the local backend: exact counts, orders and side effects."""

from __future__ import annotations

import numpy as np
import pytest

from rlflow import flow
from rlflow.algorithms import PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data import ADVANTAGES, EPS_ID, MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError, PlanError, WorkerError
from rlflow.ops import (
    ApplyGradients,
    ConcatBatches,
    Gradients,
    SelectExperiences,
    StandardizeFields,
    async_gradients,
    keys,
    parallel_rollouts,
)
from rlflow.testing.workers import counting_workers
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def make_workers(num_workers: int = 2, **kw: object) -> WorkerSet:
    return counting_workers(PGConfig, PGPolicy, num_workers=num_workers, **kw)


def weights_of(handle: object) -> dict[str, np.ndarray]:
    return flow.get(handle.get_weights.remote())[DEFAULT_POLICY_ID]  # type: ignore[attr-defined]


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in a)


def test_bulk_sync_concatenates_one_fragment_per_worker_in_index_order() -> None:
    workers = make_workers()
    rollouts = parallel_rollouts(workers, mode="bulk_sync")
    first, second = rollouts.take(2)
    assert first.count == second.count == 8
    eps = first[EPS_ID] // 1_000_000_000
    assert eps.tolist() == [1] * 4 + [2] * 4
    assert rollouts.metrics.counters[keys.NUM_ENV_STEPS_SAMPLED] == 16
    assert rollouts.metrics.counters[keys.NUM_AGENT_STEPS_SAMPLED] == 16


def test_sample_timeout_on_the_local_backend_changes_nothing() -> None:
    # Local calls finish at once, so every round is whole: the same batches, no late ones.
    plain = parallel_rollouts(make_workers(seed=3), mode="bulk_sync")
    timed = parallel_rollouts(make_workers(seed=3, sample_timeout_s=0.001), mode="bulk_sync")
    for a, b in zip(plain.take(3), timed.take(3), strict=True):
        assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)
    assert timed.metrics.counters[keys.NUM_LATE_SAMPLES] == 0
    assert timed.metrics.counters[keys.NUM_ENV_STEPS_SAMPLED] == 24


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan")])
def test_sample_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(ConfigError, match=r"PGConfig\.sample_timeout_s="):
        PGConfig(sample_timeout_s=timeout)


def test_async_yields_one_worker_batch_per_item_and_sets_current_actor() -> None:
    workers = make_workers()
    seen: list[object] = []
    rollouts = parallel_rollouts(workers, mode="async", num_async=2).for_each(
        lambda b: seen.append(flow.current_metrics().current_actor) or b
    )
    batches = rollouts.take(4)
    assert [b.count for b in batches] == [4, 4, 4, 4]
    assert set(seen) <= set(workers.remote_workers()) and len(set(seen)) == 2
    assert rollouts.metrics.counters[keys.NUM_ENV_STEPS_SAMPLED] == 16


def test_raw_mode_returns_the_parallel_iterator() -> None:
    raw = parallel_rollouts(make_workers(), mode="raw")
    assert isinstance(raw, flow.ParallelIterator)
    assert raw.num_shards() == 2


def test_no_remote_workers_samples_on_the_local_worker() -> None:
    rollouts = parallel_rollouts(make_workers(0), mode="bulk_sync")
    assert [b.count for b in rollouts.take(3)] == [4, 4, 4]
    assert rollouts.metrics.counters[keys.NUM_ENV_STEPS_SAMPLED] == 12


def test_creating_rollouts_pushes_the_learner_weights() -> None:
    workers = make_workers()
    local = workers.local_worker().get_weights()[DEFAULT_POLICY_ID]
    assert not same(weights_of(workers.remote_workers()[0]), local)  # seeds differ
    parallel_rollouts(workers)
    for handle in workers.remote_workers():
        assert same(weights_of(handle), local)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "sync"}, "mode='sync'"),
        ({"num_async": 0}, "num_async=0"),
        ({"num_async": True}, "num_async=True"),
    ],
)
def test_parallel_rollouts_rejects_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parallel_rollouts(make_workers(), **kwargs)  # type: ignore[arg-type]


def test_raw_mode_needs_remote_workers() -> None:
    with pytest.raises(ConfigError, match="needs remote workers"):
        parallel_rollouts(make_workers(0), mode="raw")


def test_dead_worker_in_a_plan_is_named() -> None:
    workers = make_workers(recreate_failed_workers=False)  # recreation: test_worker_recovery.py
    rollouts = parallel_rollouts(workers)
    next(rollouts)
    flow.kill(workers.remote_workers()[1])
    with pytest.raises(WorkerError, match=r"rollout worker\(s\) \[2\]"):
        next(rollouts)


def test_async_gradients_are_computed_on_workers_and_applied_to_the_source_only() -> None:
    workers = make_workers()
    applied_to: list[object] = []

    def record(result: object) -> object:
        applied_to.append(flow.current_metrics().current_actor)
        return result

    grads = async_gradients(workers)
    plan = grads.for_each(ApplyGradients(workers, update_all=False)).for_each(record)
    next(plan)
    ctx = plan.metrics
    assert ctx.counters[keys.NUM_ENV_STEPS_SAMPLED] == 4
    assert ctx.counters[keys.NUM_ENV_STEPS_TRAINED] == 4
    assert ctx.counters[keys.NUM_WEIGHT_SYNCS] == 1
    assert DEFAULT_POLICY_ID in ctx.info[keys.LEARNER_INFO]
    local = workers.local_worker().get_weights()[DEFAULT_POLICY_ID]
    source = applied_to[0]
    other = next(h for h in workers.remote_workers() if h is not source)
    assert same(weights_of(source), local)
    assert not same(weights_of(other), local)


def test_async_gradients_items_are_gradients_records() -> None:
    item = next(async_gradients(make_workers()))
    assert isinstance(item, Gradients)
    assert item.env_steps == 4 and set(item.grads) == {DEFAULT_POLICY_ID}


def test_concat_batches_emits_once_enough_steps_arrived() -> None:
    batches = [SampleBatch({"x": np.full(3, i)}) for i in range(7)]
    out = flow.from_iterable(batches).combine(ConcatBatches(5))
    result = out.take(10)
    assert [b["x"].tolist() for b in result] == [
        [0, 0, 0, 1, 1, 1],
        [2, 2, 2, 3, 3, 3],
        [4, 4, 4, 5, 5, 5],
    ]
    timer = out.metrics.timers[keys.SAMPLE_TIMER]
    assert timer.count == 3 and timer.units == 18


@pytest.mark.parametrize("size", [0, -1, 2.5, True])
def test_concat_batches_validates_in_the_constructor(size: object) -> None:
    with pytest.raises(ConfigError, match="min_batch_size"):
        ConcatBatches(size)  # type: ignore[arg-type]


def test_select_experiences() -> None:
    a, b = SampleBatch({"x": [1, 2]}), SampleBatch({"x": [3]})
    multi = MultiAgentBatch({"a": a, "b": b}, env_steps_count=2)
    out = SelectExperiences(["b"])(multi)
    assert isinstance(out, MultiAgentBatch)
    assert list(out.policy_batches) == ["b"] and out.count == 2
    assert SelectExperiences([DEFAULT_POLICY_ID])(a) is a
    empty = SelectExperiences(["b"])(a)
    assert isinstance(empty, MultiAgentBatch) and empty.policy_batches == {}
    with pytest.raises(ConfigError, match="list of policy ids"):
        SelectExperiences("b")
    with pytest.raises(ConfigError, match="non-empty"):
        SelectExperiences([])


def test_standardize_fields() -> None:
    batch = SampleBatch({ADVANTAGES: np.array([1.0, 2.0, 3.0, 6.0], np.float32), "c": [5, 5, 5, 5]})
    out = StandardizeFields([ADVANTAGES, "c"])(batch)
    assert isinstance(out, SampleBatch)
    assert out[ADVANTAGES].mean() == pytest.approx(0.0, abs=1e-6)
    assert out[ADVANTAGES].std() == pytest.approx(1.0, abs=1e-6)
    assert out[ADVANTAGES].dtype == np.float32
    assert out["c"].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert batch[ADVANTAGES].tolist() == [1.0, 2.0, 3.0, 6.0]  # input untouched
    multi = StandardizeFields([ADVANTAGES])(batch.as_multi_agent())
    assert isinstance(multi, MultiAgentBatch)
    np.testing.assert_allclose(multi.policy_batches[DEFAULT_POLICY_ID][ADVANTAGES], out[ADVANTAGES])
    with pytest.raises(PlanError, match="no column 'missing'"):
        StandardizeFields(["missing"])(batch)
    with pytest.raises(ConfigError):
        StandardizeFields([])

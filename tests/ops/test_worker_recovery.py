"""Rollout workers that die are recreated and the plan goes on: local backend, exact counts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlflow import flow
from rlflow.algorithms import PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.errors import WorkerError
from rlflow.ops import (
    ApplyGradients,
    CollectMetrics,
    async_gradients,
    keys,
    parallel_rollouts,
)
from rlflow.ops.recovery import RETRY_EVERY
from rlflow.testing.workers import counting_workers
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)

STEPS = 4  # one worker's sample: rollout_fragment_length=4, one env


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def make_workers(**kw: Any) -> WorkerSet:
    return counting_workers(PGConfig, PGPolicy, **kw)


def weights_of(handle: Any) -> dict[str, np.ndarray]:
    return flow.get(handle.get_weights.remote())[DEFAULT_POLICY_ID]  # type: ignore[no-any-return]


def perturb_learner(workers: WorkerSet) -> dict[str, np.ndarray]:
    """New weights on the learner only (not synced), so a recreated worker must be sent them."""
    local = workers.local_worker()
    new = {k: v + 0.5 for k, v in local.get_weights()[DEFAULT_POLICY_ID].items()}
    local.set_weights({DEFAULT_POLICY_ID: new})
    return new


def test_bulk_sync_recreates_a_dead_worker_with_the_learners_weights() -> None:
    workers = make_workers()
    rollouts = parallel_rollouts(workers, mode="bulk_sync")
    assert next(rollouts).count == 2 * STEPS
    dead = workers.remote_workers()[1]
    learner_weights = perturb_learner(workers)
    flow.kill(dead)
    # The round worker 2 died in has worker 1's batch only; the new worker 2 joins the next.
    assert [b.count for b in rollouts.take(2)] == [STEPS, 2 * STEPS]
    new = workers.remote_workers()[1]
    assert new is not dead and flow.get(new.ping.remote()) == "ok"
    assert all(np.array_equal(v, learner_weights[k]) for k, v in weights_of(new).items())
    pushed = flow.get(new.apply.remote(lambda w: w.global_vars))
    assert pushed == {"timestep": 2 * STEPS, "num_grad_updates_per_policy": {DEFAULT_POLICY_ID: 0}}
    counters = rollouts.metrics.counters
    assert counters[keys.NUM_WORKER_RESTARTS] == workers.num_restarts == 1
    assert counters[keys.NUM_ENV_STEPS_SAMPLED] == 5 * STEPS  # nothing lost counted
    assert workers.num_healthy_workers() == 2


def test_async_rollouts_drop_the_dead_workers_requests_and_go_on() -> None:
    workers = make_workers()
    rollouts = parallel_rollouts(workers, mode="async", num_async=2)
    rollouts.take(4)
    flow.kill(workers.remote_workers()[0])
    batches = rollouts.take(8)
    assert all(b.count == STEPS for b in batches)
    counters = rollouts.metrics.counters
    assert counters[keys.NUM_WORKER_RESTARTS] == 1
    assert counters[keys.NUM_ENV_STEPS_SAMPLED] == 12 * STEPS
    assert flow.get(workers.remote_workers()[0].ping.remote()) == "ok"


def test_async_gradients_go_on_after_a_worker_dies() -> None:
    workers = make_workers()
    plan = async_gradients(workers).for_each(ApplyGradients(workers, update_all=False))
    plan.take(2)
    flow.kill(workers.remote_workers()[1])
    plan.take(6)
    counters = plan.metrics.counters
    assert counters[keys.NUM_WORKER_RESTARTS] == 1
    assert counters[keys.NUM_ENV_STEPS_TRAINED] == counters[keys.NUM_ENV_STEPS_SAMPLED]


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"recreate_failed_workers": False}, "recreate_failed_workers=False"),
        ({"max_worker_restarts": 0}, "max_worker_restarts=0 restarts were made"),
    ],
)
@pytest.mark.parametrize("mode", ["bulk_sync", "async"])
def test_with_recreation_off_or_capped_the_error_names_the_worker(
    fields: dict[str, Any], rule: str, mode: str
) -> None:
    workers = make_workers(**fields)
    rollouts = parallel_rollouts(workers, mode=mode)  # type: ignore[call-overload]
    next(rollouts)
    flow.kill(workers.remote_workers()[1])
    with pytest.raises(WorkerError, match=rf"rollout worker\(s\) \[2\] of 2 died.*{rule}") as info:
        rollouts.take(4)
    assert "shard 1 of rollout_workers[1..2]" in "\n".join(info.value.__notes__)


def test_the_cap_counts_restarts_over_the_run() -> None:
    workers = make_workers(max_worker_restarts=1)
    rollouts = parallel_rollouts(workers)
    next(rollouts)
    flow.kill(workers.remote_workers()[0])
    rollouts.take(2)
    assert workers.num_restarts == 1
    flow.kill(workers.remote_workers()[0])
    with pytest.raises(WorkerError, match=r"\[1\] of 2 died.*max_worker_restarts=1"):
        rollouts.take(2)
    assert rollouts.metrics.counters[keys.NUM_WORKER_RESTARTS] == 1


def test_a_restored_count_is_the_runs_count() -> None:
    workers = make_workers(max_worker_restarts=2)
    rollouts = parallel_rollouts(workers)
    next(rollouts)
    rollouts.metrics.counters[keys.NUM_WORKER_RESTARTS] = 2  # as restored from a checkpoint
    flow.kill(workers.remote_workers()[0])
    with pytest.raises(WorkerError, match="max_worker_restarts=2"):
        rollouts.take(2)


def test_collect_metrics_recreates_a_dead_worker_once_and_reports_health() -> None:
    workers = make_workers()
    collect = CollectMetrics(workers)
    plan = parallel_rollouts(workers).for_each(collect)
    assert next(plan)["num_healthy_workers"] == 2
    flow.kill(workers.remote_workers()[0])
    # Metrics meet the dead worker first (after the round's requests were sent) and recreate
    # it; the gather's next request to the old handle gets the same new worker, uncounted.
    results = plan.take(3)
    assert [r[keys.NUM_WORKER_RESTARTS] for r in results] == [1, 1, 1]
    assert [r[keys.NUM_HEALTHY_WORKERS] for r in results] == [2, 2, 2]
    assert workers.num_restarts == 1


def test_a_worker_that_cannot_start_is_left_out_and_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workers = make_workers()
    rollouts = parallel_rollouts(workers)
    next(rollouts)
    placement = workers._placement
    start = placement.start

    def start_dead(index: int, policy: Any) -> Any:  # no capacity: the new actor dies at once
        actor = start(index, policy)
        flow.kill(actor)
        return actor

    monkeypatch.setattr(placement, "start", start_dead)
    flow.kill(workers.remote_workers()[1])
    # Worker 2 is left out when it dies in round 2 and asked for again after RETRY_EVERY
    # rounds: the run goes on with worker 1 meanwhile.
    counts = [b.count for b in rollouts.take(RETRY_EVERY - 1)]
    assert counts == [STEPS] * (RETRY_EVERY - 1)
    assert workers.num_healthy_workers() == 1
    monkeypatch.setattr(placement, "start", start)  # capacity is back
    assert [b.count for b in rollouts.take(2)] == [STEPS, 2 * STEPS]
    assert workers.num_healthy_workers() == 2
    assert rollouts.metrics.counters[keys.NUM_WORKER_RESTARTS] == 1


def test_on_recreate_sees_the_new_worker_with_the_weights_before_it_samples() -> None:
    workers = make_workers()
    seen: list[tuple[Any, Any, bool, dict[str, np.ndarray]]] = []

    def record(handle: Any) -> None:
        unsampled = flow.get(handle.apply.remote(lambda w: w._sampler is None))
        seen.append((handle, workers.remote_workers()[0], unsampled, weights_of(handle)))

    workers.on_recreate(record)
    rollouts = parallel_rollouts(workers)
    next(rollouts)
    learner_weights = perturb_learner(workers)
    dead = workers.remote_workers()[0]
    flow.kill(dead)
    rollouts.take(2)
    [(new, handed_out, unsampled, weights)] = seen
    assert handed_out is dead and new is workers.remote_workers()[0] and unsampled
    assert all(np.array_equal(v, learner_weights[k]) for k, v in weights.items())

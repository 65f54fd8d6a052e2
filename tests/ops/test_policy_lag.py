"""Policy lag: learner updates between the weights that sampled a batch and those training on it.

Local backend, CountingEnv: every count is exact.
"""

from __future__ import annotations

from typing import Any

import pytest

from rlflow import flow
from rlflow.algorithms import A2CConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data import NUM_GRAD_UPDATES
from rlflow.learner import POLICY_LAG
from rlflow.ops import (
    ApplyGradients,
    TrainOneStep,
    async_gradients,
    parallel_rollouts,
    standard_metrics_reporting,
)
from rlflow.testing.workers import counting_workers
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def make_workers(**kw: Any) -> WorkerSet:
    return counting_workers(A2CConfig, PGPolicy, **kw)


def remote_version(handle: Any) -> int:
    return int(flow.get(handle.apply.remote(lambda w: w.get_policy().update.num_grad_updates)))


def test_rows_record_the_version_of_the_weights_they_were_sampled_with() -> None:
    workers = make_workers()
    learner = workers.local_worker()
    remote = workers.remote_workers()[0]
    first = flow.get(remote.sample.remote())
    assert first[NUM_GRAD_UPDATES].tolist() == [0] * 4
    for _ in range(3):
        stats = learner.learn_on_batch(first)[DEFAULT_POLICY_ID]
    # The third update trained on rows two updates older than the learner's weights.
    assert stats[POLICY_LAG] == 2.0
    assert learner.get_policy().update.num_grad_updates == 3
    workers.sync_weights()
    assert remote_version(remote) == 3
    assert flow.get(remote.sample.remote())[NUM_GRAD_UPDATES].tolist() == [3] * 4


def test_minibatch_passes_report_the_lag_before_their_first_step() -> None:
    workers = make_workers(num_workers=0)
    learner = workers.local_worker()
    learner.get_policy().update.num_grad_updates = 5  # as after 5 updates
    batch = learner.sample()
    learner.get_policy().update.num_grad_updates = 7
    stats = learner.learn_on_batch(batch, num_sgd_iter=3, sgd_minibatch_size=2)
    assert stats[DEFAULT_POLICY_ID][POLICY_LAG] == 2.0
    assert learner.get_policy().update.num_grad_updates == 7 + 3 * 2


def test_a_sync_plan_trains_with_zero_lag_and_reports_it() -> None:
    workers = make_workers()
    config = A2CConfig(num_workers=2, min_time_s_per_iteration=0.0)  # a result per item
    plan = standard_metrics_reporting(
        parallel_rollouts(workers).for_each(TrainOneStep(workers)), workers, config
    )
    results = [next(plan) for _ in range(3)]
    assert [(r["policy_lag_mean"], r["policy_lag_max"]) for r in results] == [(0.0, 0.0)] * 3
    assert results[-1]["info"]["learner"][DEFAULT_POLICY_ID][POLICY_LAG] == 0.0


@pytest.mark.parametrize(("num_workers", "steady"), [(1, 1.0), (2, 3.0), (3, 5.0)])
def test_a3c_lag_is_bounded_by_the_workers_in_flight(num_workers: int, steady: float) -> None:
    workers = make_workers(num_workers=num_workers)
    plan = async_gradients(workers).for_each(ApplyGradients(workers, update_all=False))
    lags = [r.stats[DEFAULT_POLICY_ID][POLICY_LAG] for r in plan.take(10)]
    # The gather re-issues a worker's request before handing its gradients on (one request in
    # flight per worker), so the worker computes its next gradients before the weights with
    # this update reach it: with N workers a gradient is 2N - 1 updates old once all run, never
    # more; the first ones are younger.
    assert lags == [float(min(i, steady)) for i in range(10)]
    assert workers.local_worker().get_policy().update.num_grad_updates == 10


def test_the_count_is_kept_in_the_policy_state() -> None:
    workers = make_workers(num_workers=0)
    policy = workers.local_worker().get_policy()
    policy.update.num_grad_updates = 11
    state = policy.get_state()
    policy.update.num_grad_updates = 0
    policy.set_state(state)
    assert policy.update.num_grad_updates == 11

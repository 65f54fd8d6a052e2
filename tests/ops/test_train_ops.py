"""Train operators on the local backend: learner updates, weight pushes, counters."""

from __future__ import annotations

import numpy as np
import pytest

from rlflow import flow
from rlflow.algorithms import A2CConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data import SampleBatch
from rlflow.errors import ConfigError, PlanError
from rlflow.ops import (
    ApplyGradients,
    AverageGradients,
    ComputeGradients,
    Gradients,
    TrainOneStep,
    TrainResult,
    keys,
)
from rlflow.testing.workers import counting_workers
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def make_workers(num_workers: int = 2, **kw: object) -> WorkerSet:
    fields: dict[str, object] = {"num_envs_per_worker": 2, "grad_clip": None, **kw}
    return counting_workers(A2CConfig, PGPolicy, num_workers=num_workers, **fields)


def local_weights(workers: WorkerSet) -> dict[str, np.ndarray]:
    return workers.local_worker().get_weights()[DEFAULT_POLICY_ID]


def remote_weights(workers: WorkerSet) -> list[dict[str, np.ndarray]]:
    return [flow.get(w.get_weights.remote())[DEFAULT_POLICY_ID] for w in workers.remote_workers()]


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in a)


def samples(workers: WorkerSet, n: int) -> list[SampleBatch]:
    return [workers.local_worker().sample() for _ in range(n)]


def test_train_one_step_learns_broadcasts_and_counts() -> None:
    workers = make_workers()
    before = local_weights(workers)
    train = flow.from_iterable(samples(workers, 2)).for_each(TrainOneStep(workers))
    results = train.take(2)
    assert all(isinstance(r, TrainResult) and r.env_steps == 8 for r in results)
    assert not same(local_weights(workers), before)
    for weights in remote_weights(workers):
        assert same(weights, local_weights(workers))
    ctx = train.metrics
    assert ctx.counters[keys.NUM_ENV_STEPS_TRAINED] == 16
    assert ctx.counters[keys.NUM_AGENT_STEPS_TRAINED] == 16
    assert ctx.counters[keys.NUM_TRAIN_STEPS] == 2
    assert ctx.counters[keys.NUM_WEIGHT_SYNCS] == 2
    assert ctx.timers[keys.LEARN_TIMER].count == 2
    assert ctx.timers[keys.UPDATE_TIMER].count == 2
    assert "policy_loss" in ctx.info[keys.LEARNER_INFO][DEFAULT_POLICY_ID]
    remote_vars = [
        flow.get(w.apply.remote(lambda w: w.global_vars)) for w in workers.remote_workers()
    ]
    # The weights' version (learner updates) travels with them.
    pushed = {"timestep": 0, "num_grad_updates_per_policy": {DEFAULT_POLICY_ID: 2}}
    assert remote_vars == [pushed, pushed]


def test_train_one_step_runs_epochs_of_minibatches() -> None:
    workers = make_workers(0)
    step = TrainOneStep(workers, num_sgd_iter=3, sgd_minibatch_size=4)
    (result,) = flow.from_iterable(samples(workers, 1)).for_each(step).take(1)
    assert result.stats[DEFAULT_POLICY_ID]["num_steps"] == 6.0  # 3 epochs x (8 rows / 4)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_sgd_iter": 0}, "num_sgd_iter=0"),
        ({"sgd_minibatch_size": -1}, "sgd_minibatch_size=-1"),
        ({"policies": ["nope"]}, "unknown policy 'nope'"),
        ({"policies": "default_policy"}, "list of policy ids"),
    ],
)
def test_train_one_step_validates_in_the_constructor(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        TrainOneStep(make_workers(0), **kwargs)  # type: ignore[arg-type]


def test_compute_gradients_leaves_weights_unchanged() -> None:
    workers = make_workers(0)
    before = local_weights(workers)
    grads_op = flow.from_iterable(samples(workers, 1)).for_each(ComputeGradients(workers))
    (grads,) = grads_op.take(1)
    assert isinstance(grads, Gradients) and grads.env_steps == 8
    assert same(local_weights(workers), before)
    assert grads_op.metrics.timers[keys.COMPUTE_GRADS_TIMER].count == 1
    assert DEFAULT_POLICY_ID in grads_op.metrics.info[keys.LEARNER_INFO]


def test_average_gradients_is_the_gradient_of_the_mean_loss_over_all_rows() -> None:
    workers = make_workers(0, rollout_fragment_length=3)
    worker = workers.local_worker()
    small, large = worker.sample(), worker.sample().concat(worker.sample())
    assert (small.count, large.count) == (6, 12)
    averaged = AverageGradients()(
        [worker.compute_gradients(small), worker.compute_gradients(large)]
    )
    whole = worker.compute_gradients(small.concat(large))
    assert averaged.env_steps == 18
    for got, want in zip(
        averaged.grads[DEFAULT_POLICY_ID], whole.grads[DEFAULT_POLICY_ID], strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_average_gradients_weights_by_count() -> None:
    a = Gradients({"p": [np.array([1.0, 0.0])]}, 1, {"p": {"loss": 1.0}})
    b = Gradients({"p": [np.array([4.0, 4.0])]}, 3, {"p": {"loss": 5.0}})
    out = AverageGradients()([a, b])
    assert out.grads["p"][0].tolist() == [3.25, 3.0]
    assert out.env_steps == 4 and out.stats == {"p": {"loss": 4.0}}
    with pytest.raises(PlanError, match="empty list"):
        AverageGradients()([])


def test_apply_gradients_update_all_pushes_to_every_worker() -> None:
    workers = make_workers()
    grads = workers.local_worker().compute_gradients(workers.local_worker().sample())
    apply = flow.from_iterable([grads, (grads.grads, grads.env_steps)]).for_each(
        ApplyGradients(workers)
    )
    results = apply.take(2)
    assert [r.env_steps for r in results] == [8, 8]
    for weights in remote_weights(workers):
        assert same(weights, local_weights(workers))
    ctx = apply.metrics
    assert ctx.counters[keys.NUM_ENV_STEPS_TRAINED] == 16
    assert ctx.counters[keys.NUM_WEIGHT_SYNCS] == 2
    assert ctx.timers[keys.APPLY_GRAD_TIMER].count == 2


def test_apply_gradients_to_source_needs_a_current_actor() -> None:
    workers = make_workers()
    grads = workers.local_worker().compute_gradients(workers.local_worker().sample())
    plan = flow.from_iterable([grads]).for_each(ApplyGradients(workers, update_all=False))
    with pytest.raises(PlanError, match="source actor"):
        next(plan)


def test_apply_gradients_rejects_other_items_and_bad_arguments() -> None:
    workers = make_workers(0)
    with pytest.raises(PlanError, match="takes Gradients"):
        next(flow.from_iterable([[1, 2, 3]]).for_each(ApplyGradients(workers)))
    with pytest.raises(ConfigError, match="update_all"):
        ApplyGradients(workers, update_all=1)  # type: ignore[arg-type]

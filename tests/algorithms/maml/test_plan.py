"""The MAML plan on the local backend: a task per worker, inner steps, metrics, config errors.

Small runs with exact counts: 5-step point-navigation episodes, 5-step fragments, 2 envs per
worker, so every sample is 2 whole episodes (10 env steps).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlflow import flow
from rlflow.algorithms import MAMLConfig, get_algorithm, tuned_config
from rlflow.algorithms.maml import (
    MAML_INFO,
    InnerAdaptation,
    TaskSampler,
    adaptation_returns,
    maml_plan,
)
from rlflow.algorithms.maml.policy import MAMLPolicy
from rlflow.envs import POINT_NAV_ID
from rlflow.envs.point_nav import PointNavigation2D
from rlflow.errors import ConfigError
from rlflow.ops import keys
from rlflow.trainer import Trainer
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def small_config(**kw: Any) -> MAMLConfig:
    base: dict[str, Any] = {
        "env_config": {"horizon": 5},
        "num_workers": 3,
        "num_envs_per_worker": 2,
        "rollout_fragment_length": 5,
        "inner_adaptation_steps": 2,
        "maml_optimizer_steps": 2,
        "model": {"hidden": (8,)},
    }
    return MAMLConfig(**{**base, **kw})


def worker_tasks(workers: WorkerSet) -> list[list[Any]]:
    """Per remote worker, the task of each of its sub-envs."""
    refs = [
        w.foreach_env.remote(lambda e: e.unwrapped.get_task()) for w in workers.remote_workers()
    ]
    return [flow.get(r) for r in refs]


def test_registered_and_tuned() -> None:
    spec = get_algorithm("maml")
    assert spec.config_cls is MAMLConfig and spec.policy_cls is MAMLPolicy
    assert spec.plan is maml_plan
    config = tuned_config("maml", POINT_NAV_ID)
    assert isinstance(config, MAMLConfig) and config.env == POINT_NAV_ID


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_workers", 0),
        ("inner_adaptation_steps", -1),
        ("maml_optimizer_steps", 0),
        ("inner_lr", 0.0),
        ("clip_param", 0.0),
        ("kl_coeff", -1.0),
    ],
)
def test_config_errors_name_the_key(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=f"MAMLConfig.{field}="):
        MAMLConfig(**{field: value})


def test_env_without_set_task_is_rejected_before_any_worker() -> None:
    with pytest.raises(ConfigError, match=r"MAMLConfig.env='CartPole-v1'.*set_task"):
        MAMLConfig(env="CartPole-v1")
    with pytest.raises(ConfigError, match="set_task"):
        Trainer("maml", env="CartPole-v1", backend="local")


def test_each_worker_gets_its_own_sampled_task_and_new_ones_after_the_update() -> None:
    config = small_config()
    expected = TaskSampler(config)
    workers = WorkerSet(config, MAMLPolicy)
    try:
        plan = maml_plan(workers, config)
        first = expected.sample(3)
        assert worker_tasks(workers) == [[t, t] for t in first]
        assert len(set(first)) == 3
        next(plan)
        second = expected.sample(3)
        assert worker_tasks(workers) == [[t, t] for t in second]
    finally:
        workers.stop()


def test_a_recreated_worker_gets_a_task_before_it_samples() -> None:
    config = small_config()
    expected = TaskSampler(config)
    workers = WorkerSet(config, MAMLPolicy)
    try:
        plan = maml_plan(workers, config)
        next(plan)
        expected.sample(3), expected.sample(3)  # the first tasks, then the first update's
        flow.kill(workers.remote_workers()[2])
        # The meta-batch worker 3 died in has 2 tasks; its replacement got a task when it
        # started, and new ones come with the update, to all 3.
        result = next(plan)
        assert result["num_worker_restarts"] == 1 and result["num_healthy_workers"] == 3
        assert len(result["info"]["maml"]) > 0
        expected.sample(1)  # the replacement's task, drawn when it started
        assert worker_tasks(workers) == [[t, t] for t in expected.sample(3)]
    finally:
        workers.stop()


def test_one_iteration_counts_and_reports_returns_per_adaptation_step() -> None:
    config = small_config()
    workers = WorkerSet(config, MAMLPolicy)
    try:
        result = next(maml_plan(workers, config))
        # 3 workers x (2 inner steps + 1) samples x 2 envs x 5 steps.
        assert result["num_env_steps_sampled"] == 90
        assert result["num_env_steps_trained"] == 90
        assert result["counters"][keys.NUM_TRAIN_STEPS] == 1
        info = result["info"][MAML_INFO]
        names = [f"episode_return_mean_adapt_{k}" for k in range(3)]
        assert sorted(info) == sorted([*names, "adaptation_delta"])
        assert all(np.isfinite(info[n]) and info[n] < 0 for n in names)
        assert info["adaptation_delta"] == pytest.approx(info[names[2]] - info[names[0]])
        stats = result["info"]["learner"]["default_policy"]
        assert stats["num_steps"] == 2.0 and np.isfinite(stats["meta_loss"])
        # The workers hold the new meta-weights (their adapted weights were replaced).
        local = workers.local_worker().get_weights()["default_policy"]
        for ref in [w.get_weights.remote() for w in workers.remote_workers()]:
            remote = flow.get(ref)["default_policy"]
            assert all(np.array_equal(local[k], remote[k]) for k in local)
    finally:
        workers.stop()


def test_zero_inner_steps_is_multitask_training() -> None:
    config = small_config(inner_adaptation_steps=0)
    workers = WorkerSet(config, MAMLPolicy)
    try:
        result = next(maml_plan(workers, config))
        assert result["num_env_steps_sampled"] == 30
        info = result["info"][MAML_INFO]
        assert set(info) == {"episode_return_mean_adapt_0", "adaptation_delta"}
        assert info["adaptation_delta"] == 0.0
    finally:
        workers.stop()


def test_inner_adaptation_on_a_worker_samples_fresh_episodes_per_step() -> None:
    config = small_config(num_workers=1)
    workers = WorkerSet(config, MAMLPolicy)
    try:
        (actor,) = workers.remote_workers()
        flow.get(actor.set_task.remote((0.3, -0.2)))
        rounds = flow.from_actors([actor]).for_each(InnerAdaptation(2)).batch_across_shards()
        (result,) = next(rounds)
        assert len(result.batches) == 3 and len(result.returns) == 3
        for batch in result.batches:
            # Two whole 5-step episodes per batch, each starting at the origin.
            assert batch.count == 10
            assert np.unique(batch["eps_id"]).size == 2
            first_obs = batch["obs"][::5]
            np.testing.assert_array_equal(first_obs, np.zeros((2, 2), dtype=np.float32))
            assert abs(float(batch["advantages"].mean())) < 1e-5
        # Adapted weights differ from the meta-weights after an inner step.
        local = workers.local_worker().get_weights()["default_policy"]
        remote = flow.get(actor.get_weights.remote())["default_policy"]
        assert not np.array_equal(local["log_std"], remote["log_std"])
    finally:
        workers.stop()


def test_trainer_runs_maml_and_adaptation_returns_are_per_step() -> None:
    fields = {k: v for k, v in small_config().to_dict().items() if k in {"env_config", "model"}}
    with Trainer(
        "maml",
        backend="local",
        num_workers=2,
        num_envs_per_worker=2,
        rollout_fragment_length=5,
        **fields,
    ) as trainer:
        result = trainer.train()
        assert result["iteration"] == 1
        assert "episode_return_mean_adapt_1" in result["info"][MAML_INFO]
        weights = trainer.workers.local_worker().get_weights()
    config = small_config(num_workers=2)
    tasks = PointNavigation2D(seed=5).sample_tasks(3)  # 3 tasks on 2 workers: padded
    returns = adaptation_returns(config, weights, tasks)
    assert len(returns) == 3 and all(np.isfinite(returns))
    assert returns == adaptation_returns(config, weights, tasks)  # seeded: reproducible


@pytest.mark.ray
def test_one_iteration_on_ray(ray_backend: None) -> None:
    config = small_config(num_workers=2)
    expected = TaskSampler(config)
    workers = WorkerSet(config, MAMLPolicy)
    try:
        plan = maml_plan(workers, config)
        result = next(plan)
        # 2 workers x 3 samples x 2 envs x 5 steps; then the second draw of tasks is set.
        assert result["num_env_steps_sampled"] == 60
        assert "episode_return_mean_adapt_2" in result["info"][MAML_INFO]
        expected.sample(2)
        assert worker_tasks(workers) == [[t, t] for t in expected.sample(2)]
    finally:
        workers.stop()

"""``entropy_coeff_schedule``: checked up front, followed by the learner, read by the loss."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlflow.algorithms.a2c import A2CConfig
from rlflow.algorithms.appo import APPOConfig
from rlflow.algorithms.ppo import PPOConfig
from rlflow.errors import ConfigError
from rlflow.schedules import PiecewiseSchedule
from rlflow.trainer import Trainer

pytestmark = pytest.mark.timeout(120)

POINTS = [[0, 0.1], [400, 0.0]]


def _fields(algo: str) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "rollout_fragment_length": 25,
        "num_envs_per_worker": 2,
        "train_batch_size": 100,
        "num_workers": 1,
        "seed": 1,
    }
    if algo == "ppo":
        fields.update(sgd_minibatch_size=50, num_sgd_iter=2)
    if algo in ("a2c", "a3c", "impala", "appo"):
        # Iterations of 100 steps, not of their defaults' 1 s: the test checks each one.
        fields.update(min_steps_per_iteration=100, min_time_s_per_iteration=0.0)
    return fields


@pytest.mark.parametrize("algo", ["pg", "a2c", "a3c", "ppo", "impala", "appo"])
def test_the_learner_follows_entropy_coeff_schedule(algo: str) -> None:
    """After each iteration the learner's entropy coefficient is the schedule's value at the
    timestep of the last train item (at most one item behind the result's count)."""
    schedule = PiecewiseSchedule.from_points(POINTS, "entropy_coeff_schedule")
    seen = []
    fields = _fields(algo) | {"entropy_coeff_schedule": POINTS}
    with Trainer(algo, backend="local", **fields) as trainer:
        policy = trainer.workers.local_worker().get_policy()
        assert policy.entropy_coeff == 0.1
        for _ in range(4):
            steps = trainer.train()["num_env_steps_sampled"]
            seen.append(policy.entropy_coeff)
            assert schedule.value(steps) <= policy.entropy_coeff < 0.1
    assert seen == sorted(seen, reverse=True) and seen[-1] == 0.0


def _weights(**fields: Any) -> dict[str, Any]:
    with Trainer("pg", backend="local", **_fields("pg"), **fields) as trainer:
        for _ in range(3):
            trainer.train()
        return trainer.workers.local_worker().get_weights()["default_policy"]


def test_the_loss_reads_the_scheduled_coefficient() -> None:
    flat = _weights(entropy_coeff=0.05)
    scheduled = _weights(entropy_coeff=0.0, entropy_coeff_schedule=[[0, 0.05]])
    other = _weights(entropy_coeff=0.0)
    for key, value in flat.items():
        np.testing.assert_array_equal(value, scheduled[key])
    assert any(not np.array_equal(value, other[key]) for key, value in flat.items())


def test_unset_keeps_the_constant_and_configs_check_the_schedule() -> None:
    assert PPOConfig().entropy_coeff_schedule is None
    with Trainer("ppo", backend="local", **_fields("ppo"), entropy_coeff=0.02) as trainer:
        policy = trainer.workers.local_worker().get_policy()
        trainer.train()
        assert policy.entropy_coeff == 0.02 and policy.entropy_coeff_schedule is None
    with pytest.raises(ConfigError, match=r"A2CConfig.entropy_coeff_schedule.*timestep 0"):
        A2CConfig(entropy_coeff_schedule=[[10, 0.1]])
    with pytest.raises(ConfigError, match=r"APPOConfig.entropy_coeff_schedule\[0\]\[1\]"):
        APPOConfig(entropy_coeff_schedule=[[0, -0.1]])

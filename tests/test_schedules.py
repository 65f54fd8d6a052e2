"""`PiecewiseSchedule` and ``lr_schedule``: checked up front, followed by the learner."""

from __future__ import annotations

import pytest

from rlflow.algorithms.impala import IMPALAConfig
from rlflow.algorithms.ppo import PPOConfig
from rlflow.errors import ConfigError
from rlflow.schedules import PiecewiseSchedule
from rlflow.trainer import Trainer

pytestmark = pytest.mark.timeout(120)


def test_values_are_interpolated_and_flat_outside() -> None:
    schedule = PiecewiseSchedule.from_points([[0, 1.0], [10, 0.0], [10, 5.0], [20, 6.0]], "s")
    assert [schedule.value(t) for t in (0, 5, 9, 10, 15, 20, 10**9)] == [
        1.0,
        0.5,
        pytest.approx(0.1),
        5.0,
        5.5,
        6.0,
        6.0,
    ]


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ([], "must be a non-empty list of [timestep, value] pairs"),
        ("0,1", "must be a non-empty list"),
        ([[0, 1.0, 2.0]], "item 0 is [0, 1.0, 2.0]"),
        ([[5, 1.0]], "must start at timestep 0, got 5"),
        ([[0, 1.0], [10, 1.0], [5, 1.0]], "item 2 (5) comes before item 1 (10)"),
        ([[0, -1.0]], "PPOConfig.lr_schedule[0][1] (value)=-1.0 must be a number >= 0"),
        ([[0, 1.0], [-3, 1.0]], "PPOConfig.lr_schedule[1][0] (timestep)=-3 must be an integer"),
    ],
)
def test_bad_schedules_name_the_field(points: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        PPOConfig(lr_schedule=points)  # type: ignore[arg-type]
    assert message in str(info.value)
    assert "PPOConfig.lr_schedule" in str(info.value)


@pytest.mark.parametrize("algo", ["ppo", "impala"])
def test_the_learner_follows_lr_schedule(algo: str) -> None:
    """After each iteration the learner's optimizer runs at the schedule's lr for the steps
    sampled so far (the global timestep)."""
    points = [[0, 1e-3], [2000, 1e-4]]
    schedule = PiecewiseSchedule.from_points(points, "lr_schedule")
    fields = {
        "rollout_fragment_length": 25,
        "num_envs_per_worker": 2,
        "train_batch_size": 100,
        "num_workers": 1,
        "lr_schedule": points,
    }
    if algo == "ppo":
        fields.update(sgd_minibatch_size=50, num_sgd_iter=2)
    if algo == "impala":
        fields.update(min_steps_per_iteration=400, min_time_s_per_iteration=0.0)
    seen = []
    with Trainer(algo, backend="local", **fields) as trainer:
        policy = trainer.workers.local_worker().get_policy()
        assert policy.update.lr == 1e-3
        for _ in range(3):
            steps = trainer.train()["num_env_steps_sampled"]
            lrs = {group["lr"] for group in policy.update.optimizer.param_groups}
            seen.append(policy.update.lr)
            # The learner saw the timestep of the last train item: at most one item behind.
            assert lrs == {policy.update.lr}
            assert schedule.value(steps) <= policy.update.lr < 1e-3
    assert seen == sorted(seen, reverse=True)
    assert isinstance(IMPALAConfig(lr_schedule=points).lr_schedule, list)

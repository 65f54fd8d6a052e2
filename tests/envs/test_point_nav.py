"""MAML's 2-D point navigation and the task-setting protocol."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlflow.envs.point_nav import PointNavigation2D, PointNavTask, TaskSettableEnv
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(120)


def test_reward_golden_values() -> None:
    env = PointNavigation2D(PointNavTask(0.3, -0.4))
    obs, info = env.reset()
    assert obs.tolist() == [0.0, 0.0] and obs.dtype == np.float32
    assert info["task"] == PointNavTask(0.3, -0.4)
    # (0, 0) + (0.1, -0.05) = (0.1, -0.05); distance to (0.3, -0.4) = hypot(0.2, 0.35).
    obs, reward, terminated, truncated, _ = env.step(np.array([0.1, -0.05]))
    np.testing.assert_allclose(obs, [0.1, -0.05], rtol=1e-6)
    assert reward == pytest.approx(-math.hypot(0.2, 0.35))
    assert not terminated and not truncated
    # (0.1, -0.05) + (0.0, 0.0) stays: the same reward again.
    assert env.step([0.0, 0.0])[1] == pytest.approx(-math.hypot(0.2, 0.35))


def test_actions_are_clipped_to_max_speed() -> None:
    env = PointNavigation2D(PointNavTask(0.0, 0.5))
    env.reset()
    # (5, -3) clips to (0.1, -0.1): distance to (0, 0.5) = hypot(0.1, 0.6).
    obs, reward, *_ = env.step([5.0, -3.0])
    np.testing.assert_allclose(obs, [0.1, -0.1], rtol=1e-6)
    assert reward == pytest.approx(-math.hypot(0.1, 0.6))
    assert env.action_space.high.tolist() == pytest.approx([0.1, 0.1])


def test_goal_reached_terminates_and_horizon_truncates() -> None:
    env = PointNavigation2D(PointNavTask(0.2, 0.0))
    env.reset()
    assert env.step([0.1, 0.0])[2] is False
    _, reward, terminated, truncated, _ = env.step([0.1, 0.0])
    assert terminated and not truncated and reward == pytest.approx(0.0, abs=1e-12)
    env = PointNavigation2D(PointNavTask(0.5, 0.5), horizon=3)
    env.reset()
    flags = [env.step([0.0, 0.0])[3] for _ in range(3)]
    assert flags == [False, False, True]


def test_seeded_task_sampling_is_reproducible() -> None:
    first = PointNavigation2D(seed=7).sample_tasks(5)
    second = PointNavigation2D(seed=7).sample_tasks(5)
    assert first == second
    assert first != PointNavigation2D(seed=8).sample_tasks(5)
    goals = np.array(PointNavigation2D(seed=0).sample_tasks(1000))
    assert goals.min() >= -0.5 and goals.max() <= 0.5
    assert abs(goals.mean()) < 0.05  # uniform on [-0.5, 0.5]^2 has mean 0
    # Without a task, the first task is the first goal drawn.
    assert PointNavigation2D(seed=7).get_task() == first[0]


def test_set_task_changes_the_goal() -> None:
    env = PointNavigation2D(PointNavTask(0.5, 0.5))
    assert isinstance(env, TaskSettableEnv)
    env.set_task(PointNavTask(-0.1, 0.0))
    assert env.get_task() == PointNavTask(-0.1, 0.0)
    env.reset()
    # One step of (-0.1, 0) reaches the new goal exactly.
    _, reward, terminated, *_ = env.step([-0.1, 0.0])
    assert terminated and reward == pytest.approx(0.0, abs=1e-12)
    env.set_task((0.2, 0.3))
    assert env.get_task() == PointNavTask(0.2, 0.3)
    with pytest.raises(ConfigError, match="two finite numbers"):
        env.set_task((0.1, float("nan")))

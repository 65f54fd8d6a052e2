"""RolloutWorker.set_task / foreach_env on the point-navigation task env (local backend)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlflow.algorithms import MAMLConfig, PGConfig
from rlflow.algorithms.maml.policy import MAMLPolicy
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.data import EPS_ID, OBS, REWARDS
from rlflow.envs import POINT_NAV_ID
from rlflow.envs.point_nav import PointNavTask
from rlflow.errors import ConfigError
from rlflow.workers import RolloutWorker

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def point_worker(**kw: object) -> RolloutWorker:
    base: dict[str, object] = {
        "env_config": {"horizon": 4},
        "num_workers": 1,
        "num_envs_per_worker": 3,
        "rollout_fragment_length": 3,
        "model": {"hidden": (8,)},
    }
    return RolloutWorker(MAMLConfig(**{**base, **kw}), MAMLPolicy, worker_index=1)


def test_foreach_env_visits_every_sub_env_in_order() -> None:
    worker = point_worker()
    envs = worker.foreach_env(lambda env: env)
    assert len(envs) == 3 and len({id(e) for e in envs}) == 3
    assert worker.foreach_env(lambda env: env.unwrapped.horizon) == [4, 4, 4]


def test_set_task_sets_every_sub_env_and_restarts_episodes() -> None:
    worker = point_worker()
    worker.sample()  # 3 of 4 steps into the first episodes
    task = PointNavTask(0.25, -0.1)
    worker.set_task(task)
    assert worker.foreach_env(lambda env: env.unwrapped.get_task()) == [task] * 3
    batch = worker.sample()
    # Fresh episodes from the origin: each sub-env's first row is (0, 0), with new episode ids.
    first_rows = batch[OBS][::3]
    np.testing.assert_array_equal(first_rows, np.zeros((3, 2), dtype=np.float32))
    assert np.unique(batch[EPS_ID]).size == 3
    # Rewards are minus the distance from the new position to the new goal.
    new_pos = np.vstack([batch[OBS][1:], np.zeros((1, 2))])  # next row's position
    for row in (0, 1, 3, 4, 6, 7):
        expected = -math.hypot(new_pos[row][0] - 0.25, new_pos[row][1] + 0.1)
        assert batch[REWARDS][row] == pytest.approx(expected, rel=1e-5)
    # The in-progress episodes were dropped, not reported.
    assert worker.pop_episode_stats() == []


def test_set_task_on_an_env_without_set_task_names_the_worker() -> None:
    config = PGConfig(env="CartPole-v1", num_workers=1, model={"hidden": (8,)})
    worker = RolloutWorker(config, PGPolicy, worker_index=2)
    with pytest.raises(ConfigError, match=r"RolloutWorker 2.set_task: sub-env 0.*set_task"):
        worker.set_task(PointNavTask(0.0, 0.0))


def test_point_nav_id_is_registered_once() -> None:
    import gymnasium as gym

    import rlflow.envs

    rlflow.envs._register_task_envs()  # again: a no-op
    env = gym.make(POINT_NAV_ID, horizon=7)
    assert env.unwrapped.horizon == 7
    env.close()

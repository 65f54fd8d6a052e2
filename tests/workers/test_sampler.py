"""The one env-stepping core: training (`sample`) and evaluation (`evaluate`) step alike."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from gymnasium import spaces

from rlflow.algorithms import PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.data import ACTION_DIST_INPUTS, ACTIONS, EPS_ID, LOGP, VF_PREDS
from rlflow.envs import EpisodeStat
from rlflow.envs.vector import env_action, env_actions
from rlflow.errors import ConfigError
from rlflow.testing.envs import CountingEnv
from rlflow.workers import RolloutWorker
from rlflow.workers.rollout_worker import make_sampler
from rlflow.workers.sampler import SamplerSpec

pytestmark = pytest.mark.timeout(120)

Array = npt.NDArray[Any]

RECEIVED: list[Array] = []
"""Every action a `BoxEnv` was stepped with, in order."""


class BoxEnv(gym.Env[Array, Array]):
    """Actions in Box(-1, 1); reward = the action taken; episodes of 3 steps."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0.0, np.inf, (1,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Array, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Array) -> tuple[Array, float, bool, bool, dict[str, Any]]:
        RECEIVED.append(np.array(action))
        self._t += 1
        return np.array([self._t], np.float32), float(action[0]), self._t >= 3, False, {}


class TooFarPolicy(PGPolicy):
    """Always the action 3.0, outside the env's bounds, exploring or not."""

    def compute_actions(
        self, obs: npt.ArrayLike, *, explore: bool = True, memory: Any = None
    ) -> tuple[Array, dict[str, Array]]:
        n = len(np.asarray(obs))
        extra = {
            LOGP: np.zeros(n, np.float32),
            VF_PREDS: np.zeros(n, np.float32),
            ACTION_DIST_INPUTS: np.zeros((n, 2), np.float32),
        }
        return np.full((n, 1), 3.0), extra


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def box_worker() -> RolloutWorker:
    config = PGConfig(env=BoxEnv, num_workers=0, rollout_fragment_length=3, model={"hidden": (4,)})
    return RolloutWorker(config, TooFarPolicy, worker_index=0)


def test_evaluation_clips_box_actions_exactly_like_sampling() -> None:
    worker = box_worker()
    RECEIVED.clear()
    batch = worker.sample()
    sampled = list(RECEIVED)
    RECEIVED.clear()
    episodes = worker.evaluate(1, seed=0)
    evaluated = list(RECEIVED)
    assert batch[ACTIONS].tolist() == [[3.0]] * 3  # the loss sees the policy's own actions
    for received in (sampled, evaluated):
        assert [a.tolist() for a in received] == [[1.0]] * 3
        assert all(a.dtype == np.float32 for a in received)
    assert worker.pop_episode_stats() == [EpisodeStat(3.0, 3)] == episodes


def test_env_action_is_the_one_rule_for_a_batch_and_for_one_agent() -> None:
    box = spaces.Box(-1.0, 1.0, (2,), np.float32)
    rows = env_actions(box, np.array([[3.0, -0.5], [-7.0, 0.25]]))
    assert rows.dtype == np.float32 and rows.tolist() == [[1.0, -0.5], [-1.0, 0.25]]
    assert [env_action(box, row).tolist() for row in rows] == rows.tolist()
    assert env_actions(spaces.Discrete(3), np.array([2, 0])) == [2, 0]
    assert type(env_action(spaces.Discrete(3), np.int64(2))) is int


def test_evaluation_leaves_the_training_envs_and_episode_ids_alone() -> None:
    config = PGConfig(
        env=CountingEnv,
        env_config={"episode_len": 3},
        num_workers=0,
        num_envs_per_worker=2,
        rollout_fragment_length=5,
        model={"hidden": (4,)},
    )
    worker, twin = (RolloutWorker(config, PGPolicy, worker_index=0) for _ in range(2))
    worker.sample()
    twin.sample()
    assert worker.evaluate(4, seed=1) == [EpisodeStat(3.0, 3)] * 4
    got, expected = worker.sample(), twin.sample()
    assert got[EPS_ID].tolist() == expected[EPS_ID].tolist()
    assert worker.pop_episode_stats() == twin.pop_episode_stats()


def test_run_episodes_rejects_a_bad_count() -> None:
    worker = box_worker()
    creator = worker.foreach_env(lambda e: type(e.unwrapped))[0]
    sampler = make_sampler(
        SamplerSpec(creator, 1, multi_agent=False, seed=0),
        worker.policy_map,
        new_eps_id=iter(range(1, 100)).__next__,
    )
    with pytest.raises(ConfigError, match="num_episodes=0"):
        sampler.run_episodes(0)
    with pytest.raises(ConfigError, match="num_episodes"):
        worker.evaluate(0)


def test_a_worker_builds_its_sampler_spec_from_the_config_once() -> None:
    config = PGConfig(
        env=CountingEnv,
        env_config={"episode_len": 3},
        num_envs_per_worker=3,
        seed=7,
        restart_failed_sub_environments=True,
        model={"hidden": (4,)},
    )
    worker = RolloutWorker(config, PGPolicy, worker_index=2)
    spec = worker.sampler_spec
    assert spec._replace(creator=None) == SamplerSpec(
        None,  # type: ignore[arg-type]  # the config's env creator, a fresh closure
        3,
        multi_agent=False,
        seed=7 + 2 * 10_000,
        explore=True,
        mapping_fn=None,
        restart_failed=True,
        vector_env="rlflow",  # "auto" resolved: restarts need rlflow's own loop
        env_id=None,
        worker_index=2,
    )
    assert len(worker.foreach_env(lambda env: env)) == 3
    assert worker.evaluate(2, seed=1) == [EpisodeStat(3.0, 3)] * 2
    assert worker.sampler_spec is spec  # evaluation ran a variant, leaving the worker's alone

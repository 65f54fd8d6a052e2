"""``restart_failed_sub_environments`` through the samplers and rollout workers, and env checks
before any actor starts (issue 11 parts 3 and 10)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from gymnasium import spaces

from rlflow import Trainer
from rlflow.algorithms import PGConfig, PPOConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.config import PolicySpec
from rlflow.data import (
    ACTION_DIST_INPUTS,
    AGENT_INDEX,
    EPS_ID,
    LOGP,
    OBS,
    TRUNCATEDS,
    VALUE_TARGETS,
    VF_PREDS,
    SampleBatch,
)
from rlflow.envs import CARTPOLE_CRASHING_ID
from rlflow.envs.crashing import CrashingEnv, EnvCrashError
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentEnv, MultiAgentStep
from rlflow.errors import ConfigError
from rlflow.setup import check_env
from rlflow.testing.envs import CountingEnv
from rlflow.workers import RolloutWorker
from rlflow.workers.rollout_worker import make_sampler
from rlflow.workers.sampler import SamplerSpec

pytestmark = pytest.mark.timeout(120)

Array = npt.NDArray[Any]


class ValueIsObsPolicy(PGPolicy):
    """Always action 0; V(obs) = obs[0], so value targets are known exactly."""

    def compute_actions(
        self, obs: npt.ArrayLike, *, explore: bool = True, memory: Any = None
    ) -> tuple[Array, dict[str, Array]]:
        values = np.asarray(obs, dtype=np.float32)[:, 0]
        n = len(values)
        extra = {
            LOGP: np.zeros(n, np.float32),
            VF_PREDS: values,
            ACTION_DIST_INPUTS: np.zeros((n, 2), np.float32),
        }
        return np.zeros(n, dtype=np.int64), extra

    def value(self, obs: npt.ArrayLike, *, memory: Any = None) -> Array:
        return np.asarray(obs, dtype=np.float32)[:, 0]


CONFIG = PGConfig(gamma=0.5, use_critic=True, use_gae=False, model={"hidden": (4,)})


class Crashes:
    """Creators whose k-th built env (0-based) crashes at the steps ``plan[k]`` gives."""

    def __init__(self, plan: Mapping[int, tuple[int, ...]], episode_len: int = 10) -> None:
        self.plan, self.episode_len, self.built = plan, episode_len, 0

    def __call__(self) -> gym.Env[Any, Any]:
        steps, self.built = self.plan.get(self.built, ()), self.built + 1
        return CrashingEnv(CountingEnv(self.episode_len), crash_on_steps=steps)


def sampler(creator: Any, num_envs: int, *, restart_failed: bool = True) -> Any:
    policy = ValueIsObsPolicy(
        spaces.Box(0.0, np.inf, (1,), np.float32), spaces.Discrete(2), CONFIG, seed=0
    )
    spec = SamplerSpec(
        creator,
        num_envs,
        multi_agent=False,
        seed=0,
        restart_failed=restart_failed,
        env_id="Counting-v0",
        worker_index=2,
    )
    return make_sampler(spec, {"default_policy": policy}, new_eps_id=itertools.count(1).__next__)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


# ----------------------------------------------------------------------------- single agent
def test_step_crash_cuts_the_episode_at_the_last_good_row_and_drops_the_failed_one() -> None:
    # Sub-env 1's env crashes in its 3rd step (row 2 of the fragment).
    s = sampler(Crashes({1: (3,)}), 2)
    batch = s.sample(5)
    assert batch.count == 2 * 5 - 1
    env1 = batch.slice(5, 9)  # rows are ordered by sub-env, then time
    assert env1[OBS][:, 0].tolist() == [0.0, 1.0, 0.0, 1.0]  # row 2 (obs 2.0) dropped
    assert env1[TRUNCATEDS].tolist() == [False, True, False, False]
    ids = env1[EPS_ID].tolist()
    assert ids[0] == ids[1] != ids[2] == ids[3]
    # Row 1 bootstraps from V(obs the failed action was taken on) = 2: 1 + 0.5 * 2.
    assert env1[VALUE_TARGETS][:2].tolist() == [1.0 + 0.5 * 2.0, 2.0]
    assert s.pop_episode_stats() == []
    assert s.pop_env_restarts() == 1 and s.pop_env_restarts() == 0
    s.sample(5)
    assert s.pop_env_restarts() == 0
    s.close()


def test_crash_in_the_first_row_of_a_fragment_drops_only_that_row() -> None:
    s = sampler(Crashes({0: (4,)}), 1)
    first = s.sample(3)
    second = s.sample(3)
    assert first.count == 3 and second.count == 2
    assert second[OBS][:, 0].tolist() == [0.0, 1.0]
    assert second[EPS_ID][0] != first[EPS_ID][-1]
    s.close()


def test_without_restarts_the_error_names_env_worker_and_sub_env() -> None:
    s = sampler(Crashes({1: (2,)}), 2, restart_failed=False)
    with pytest.raises(EnvCrashError) as info:
        s.sample(5)
    assert info.value.__notes__ == [
        "raised by env 'Counting-v0', rollout worker 2, sub-env 1, in step()"
    ]


def test_rollout_worker_keeps_sampling_crashing_cartpole_and_counts_restarts() -> None:
    config = PPOConfig(
        env=CARTPOLE_CRASHING_ID,
        env_config={"p_crash": 0.02, "p_crash_reset": 0.05},
        num_workers=0,
        num_envs_per_worker=4,
        rollout_fragment_length=50,
        restart_failed_sub_environments=True,
        model={"hidden": (8,)},
    )
    worker = RolloutWorker(config, PPOPolicy, worker_index=1)
    rows = [worker.sample().count for _ in range(5)]
    restarts = worker.pop_env_restarts()
    assert restarts >= 5 and worker.pop_env_restarts() == 0
    assert sum(rows) <= 5 * 200 and sum(rows) >= 5 * 200 - restarts
    episodes = worker.pop_episode_stats()
    assert episodes and all(e.return_ == e.length for e in episodes)
    worker.stop()


def test_rollout_worker_error_without_restarts_names_the_worker() -> None:
    config = PPOConfig(
        env=CARTPOLE_CRASHING_ID,
        env_config={"p_crash": 0.5},
        num_workers=0,
        rollout_fragment_length=50,
        model={"hidden": (8,)},
    )
    worker = RolloutWorker(config, PPOPolicy, worker_index=3)
    with pytest.raises(EnvCrashError) as info:
        worker.sample()
    assert (
        f"raised by env '{CARTPOLE_CRASHING_ID}', rollout worker 3, sub-env 0"
        in (info.value.__notes__[0])
    )


# ----------------------------------------------------------------------------- multi-agent
class TwoAgents(MultiAgentEnv):
    """Agents a and b act every step; observation [t]; reward 1; episodes of 4 steps. The
    k-th instance (0-based, class-wide) raises in the steps ``CRASH[k]`` (1-based; 0: in its
    first reset)."""

    CRASH: ClassVar[dict[int, tuple[int, ...]]] = {}
    built = 0

    def __init__(self) -> None:
        self.possible_agents = ["a", "b"]
        self.agents: list[str] = []
        box = spaces.Box(0.0, 100.0, (1,), np.float32)
        self.observation_spaces = dict.fromkeys(self.possible_agents, box)
        self.action_spaces = {a: spaces.Discrete(2) for a in self.possible_agents}
        self.crash = TwoAgents.CRASH.get(TwoAgents.built, ())
        TwoAgents.built += 1
        self.t = self.steps = 0

    def _obs(self) -> dict[str, Any]:
        return {a: np.array([self.t], np.float32) for a in self.agents}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        if 0 in self.crash and self.t == 0 and not self.agents:
            raise EnvCrashError("TwoAgents: crash in reset")
        self.t, self.agents = 0, ["a", "b"]
        return self._obs(), {}

    def step(self, action_dict: Mapping[str, Any]) -> MultiAgentStep:
        self.steps += 1
        if self.steps in self.crash:
            raise EnvCrashError(f"TwoAgents: crash in step {self.steps}")
        self.t += 1
        done = self.t >= 4
        flags = {"a": False, "b": False, ALL_AGENTS: done}
        return MultiAgentStep(
            self._obs(), {"a": 1.0, "b": 1.0}, {**flags, ALL_AGENTS: False}, flags, {}
        )


def ma_worker(crash: dict[int, tuple[int, ...]], *, restart: bool) -> RolloutWorker:
    TwoAgents.CRASH, TwoAgents.built = crash, 0
    config = PGConfig(
        env=TwoAgents,
        num_workers=0,
        rollout_fragment_length=4,
        gamma=0.5,
        use_critic=True,
        use_gae=False,
        model={"hidden": (4,)},
        policies={"p": PolicySpec()},
        restart_failed_sub_environments=restart,
    )
    return RolloutWorker(config, ValueIsObsPolicy, worker_index=1)


def test_multi_agent_step_crash_rebuilds_the_env_and_cuts_each_trajectory() -> None:
    worker = ma_worker({1: (2,)}, restart=True)  # instance 0 is the worker's probe
    batch = worker.sample().policy_batches["p"]
    for agent in (0, 1):
        mask = batch[AGENT_INDEX] == agent
        rows = SampleBatch({k: v[mask] for k, v in batch.items()})
        assert rows[OBS][:, 0].tolist() == [0.0, 0.0, 1.0]  # the failed step's row is gone
        assert rows[TRUNCATEDS].tolist() == [True, False, False]
        assert rows[VALUE_TARGETS][0] == pytest.approx(1.0 + 0.5 * 1.0)
        ids = rows[EPS_ID].tolist()
        assert ids[0] != ids[1] == ids[2]
    assert batch.count == 6
    assert worker.pop_episode_stats() == []
    assert worker.pop_env_restarts() == 1
    worker.sample()
    assert [e.length for e in worker.pop_episode_stats()] == [4]  # the new episode only


def test_multi_agent_reset_crash_rebuilds_the_env() -> None:
    worker = ma_worker({1: (0,)}, restart=True)
    batch = worker.sample().policy_batches["p"]
    assert batch.count == 8 and worker.pop_env_restarts() == 1
    assert [e.length for e in worker.pop_episode_stats()] == [4]


def test_multi_agent_error_without_restarts_names_env_worker_and_env_index() -> None:
    worker = ma_worker({1: (1,)}, restart=False)
    with pytest.raises(EnvCrashError) as info:
        worker.sample()
    assert info.value.__notes__ == [
        "raised by env 'TwoAgents', rollout worker 1, sub-env 0, in step()"
    ]


def test_multi_agent_observations_are_checked() -> None:
    class WrongShape(TwoAgents):
        def _obs(self) -> dict[str, Any]:
            return {a: np.zeros(3, np.float32) for a in self.agents}

    config = PGConfig(
        env=WrongShape, num_workers=0, model={"hidden": (4,)}, policies={"p": PolicySpec()}
    )
    worker = RolloutWorker(config, PGPolicy, worker_index=1)
    with pytest.raises(ConfigError, match="agent 'a', reset\\(\\): observation has shape \\(3,\\)"):
        worker.sample()


# ----------------------------------------------------------------------------- validation
class FiveObs(gym.Env[Array, int]):
    """Declares observations of shape (4,), gives (5,)."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Array, dict[str, Any]]:
        return np.zeros(5, np.float32), {}

    def step(self, action: int) -> tuple[Array, float, bool, bool, dict[str, Any]]:
        return np.zeros(5, np.float32), 0.0, False, False, {}


def test_worker_names_env_expected_and_got_for_a_wrong_observation_shape() -> None:
    config = PPOConfig(env=FiveObs, num_workers=0, model={"hidden": (4,)})
    worker = RolloutWorker(config, PPOPolicy, worker_index=2)
    with pytest.raises(ConfigError) as info:
        worker.sample()
    expected = (
        "env 'FiveObs', rollout worker 2, sub-env 0, reset(): observation has shape (5,), "
        "expected shape (4,)"
    )
    assert expected in str(info.value)


def test_check_env_accepts_what_the_algorithm_supports() -> None:
    check_env(PPOConfig(env="CartPole-v1"), PPOPolicy, algo="ppo")
    check_env(PPOConfig(env="Pendulum-v1"), PPOPolicy, algo="ppo")
    check_env(PPOConfig(env="multi_cartpole"), PPOPolicy, algo="ppo")


def test_results_count_env_restarts_of_the_run() -> None:
    # Crashes in p=0.02 of steps: the run goes on and every rebuilt sub-env is in the results.
    with Trainer(
        "pg",
        env=CARTPOLE_CRASHING_ID,
        env_config={"p_crash": 0.02},
        backend="local",
        num_workers=0,
        num_envs_per_worker=2,
        rollout_fragment_length=50,
        train_batch_size=100,
        restart_failed_sub_environments=True,
    ) as trainer:
        results = [trainer.train() for _ in range(3)]
    counts = [r["num_env_restarts"] for r in results]
    assert counts == sorted(counts) and counts[-1] > 0
    assert results[-1]["counters"]["num_env_restarts"] == counts[-1]
    assert results[-1]["num_env_steps_sampled"] > 0

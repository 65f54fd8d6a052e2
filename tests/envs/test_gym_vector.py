"""``vector_env``: Gymnasium vector envs and EnvPool as a rollout worker's env engine
(`rlflow.envs.gym_vector`), against rlflow's own in-process loop (issue 12 part 2)."""

from __future__ import annotations

import functools
import importlib.util
import itertools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlflow import Trainer
from rlflow.algorithms import PPOConfig
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.config.rollouts import VECTOR_ENVS
from rlflow.data import REWARDS, TERMINATEDS, TRUNCATEDS
from rlflow.envs.creator import config_env_creator, flatten_if_structured, make_env_creator
from rlflow.envs.gym_vector import (
    AUTO_VECTOR_ENV,
    EXACT_ENGINES,
    GymVectorEnv,
    gym_id,
    make_vector_env,
    resolve_vector_env,
)
from rlflow.errors import ConfigError
from rlflow.workers.sampler import SamplerSpec
from rlflow.workers.vector_sampler import VectorSampler

pytestmark = pytest.mark.timeout(180)

CARTPOLE = functools.partial(flatten_if_structured, make_env_creator("CartPole-v1"))
HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None


def run(engine: str, *, num_envs: int = 4, steps: int = 300, seed: int = 3) -> Any:
    """Step ``engine`` with seeded random actions: (first obs, steps, episode stats, venv)."""
    venv = make_vector_env(CARTPOLE, num_envs, seed, vector_env=engine)
    rng = np.random.default_rng(0)
    try:
        first = venv.reset()
        records = [venv.step(rng.integers(0, 2, num_envs)) for _ in range(steps)]
        return first, records, venv.pop_episode_stats(), venv
    finally:
        venv.close()


@pytest.mark.parametrize("engine", [e for e in EXACT_ENGINES if e != "rlflow"])
def test_same_step_engines_give_rlflows_trajectories_exactly(engine: str) -> None:
    # EXACT_ENGINES are those "auto" may pick: each must pass this.
    first, records, episodes, _ = run("rlflow")
    first_g, records_g, episodes_g, venv_g = run(engine)
    assert isinstance(venv_g, GymVectorEnv) and venv_g.step_mode == "same"
    np.testing.assert_array_equal(first_g, first)
    for step, step_g in zip(records, records_g, strict=True):
        for field, value in step._asdict().items():
            np.testing.assert_array_equal(getattr(step_g, field), value, err_msg=field)
    assert len(episodes) > 30  # many resets were crossed
    assert episodes_g == episodes


@pytest.mark.parametrize(
    "engine",
    ["gymnasium", pytest.param("envpool", marks=pytest.mark.skipif(not HAS_ENVPOOL, reason=""))],
)
def test_next_step_engines_report_their_reset_rows_as_dropped(engine: str) -> None:
    # CartPoleVectorEnv and EnvPool reset a finished episode on the next step, ignoring its
    # action: that row is reported like a failed step of rlflow's loop (restarted, reward 0,
    # truncated, final_obs the observation acted on), and is no part of any episode.
    num_envs, steps = 4, 300
    venv = make_vector_env(CARTPOLE, num_envs, 3, vector_env=engine)
    assert isinstance(venv, GymVectorEnv) and venv.step_mode == "next"
    rng = np.random.default_rng(0)
    obs, ended, resets = venv.reset(), np.zeros(num_envs, bool), 0
    for _ in range(steps):
        step = venv.step(rng.integers(0, 2, num_envs))
        assert sorted(venv.restarted) == np.flatnonzero(ended).tolist()
        for i in venv.restarted:
            assert (step.rewards[i], step.terminateds[i], step.truncateds[i]) == (0.0, False, True)
            np.testing.assert_array_equal(step.final_obs[i], obs[i])
        resets += len(venv.restarted)
        ended = (step.terminateds | step.truncateds) & ~np.isin(range(num_envs), venv.restarted)
        obs = step.next_obs.copy()
    episodes = venv.pop_episode_stats()
    venv.close()
    assert resets >= 30
    # CartPole pays 1 a step: every counted episode's return is its length, and the steps
    # not in a finished episode are the reset rows and the episodes still running.
    assert all(e.return_ == e.length for e in episodes)
    running = steps * num_envs - resets - sum(e.length for e in episodes)
    assert 0 <= running <= num_envs * 500


def test_vector_entry_point_differs_from_rlflow_in_seeding_only_by_design() -> None:
    # CartPoleVectorEnv draws every sub-env's first state from one RNG: not rlflow's seed + j.
    first, *_ = run("rlflow", steps=0)
    first_v, _, _, venv = run("gymnasium", steps=0)
    assert type(venv.venv).__name__ == "CartPoleVectorEnv"
    assert first_v.shape == first.shape and not np.array_equal(first_v, first)
    assert np.all(np.abs(first_v) <= 0.05)  # CartPole's reset range, as the single env's


def sample(engine: str, length: int = 100) -> Any:
    """A fragment of ``length`` steps x 4 sub-envs of a seeded PPO policy on ``engine``."""
    env = gym.make("CartPole-v1")
    policy = PPOPolicy(env.observation_space, env.action_space, PPOConfig(), seed=0)
    spec = SamplerSpec(CARTPOLE, 4, multi_agent=False, seed=3, vector_env=engine)
    sampler = VectorSampler(spec, policy, itertools.count().__next__)
    try:
        return sampler.sample(length), sampler.pop_episode_stats()
    finally:
        sampler.close()


def test_sampler_on_the_sync_engine_gives_rlflows_fragment() -> None:
    batch, episodes = sample("rlflow")
    batch_g, episodes_g = sample("gymnasium-sync")
    assert sorted(batch_g.keys()) == sorted(batch.keys())
    for key in batch:
        np.testing.assert_array_equal(batch_g[key], batch[key], err_msg=key)
    assert episodes_g == episodes and len(episodes) > 10


def test_sampler_on_a_next_step_engine_drops_the_reset_rows() -> None:
    batch, episodes = sample("gymnasium")
    # Each reset row (reward 0) is gone: the others are CartPole's 1 per step.
    assert np.all(batch[REWARDS] == 1.0)
    ends = int(np.sum(batch[TERMINATEDS] | batch[TRUNCATEDS]))
    assert len(episodes) == ends > 10
    assert 400 - len(episodes) <= batch.count < 400


def test_gym_id_sees_plain_gymnasium_ids_only() -> None:
    assert gym_id(CARTPOLE) == ("CartPole-v1", {})
    wrapped = config_env_creator(
        PPOConfig(env="CartPole-v1", env_wrappers=["gymnasium.wrappers.ClipReward"])
    )
    assert gym_id(wrapped) is None
    assert gym_id(lambda: gym.make("CartPole-v1")) is None


def test_unknown_vector_env_is_a_config_error_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"PPOConfig.vector_env='gym': must be one of 'auto'"):
        PPOConfig(vector_env="gym")
    with pytest.raises(ConfigError, match=r"vector_env='sync'.*'gymnasium-sync'"):
        resolve_vector_env("sync", CARTPOLE)
    assert VECTOR_ENVS[0] == "auto" and PPOConfig().vector_env == "auto"


def test_features_only_rlflow_has_are_refused_or_fall_back() -> None:
    assert resolve_vector_env("auto", CARTPOLE) == "rlflow"
    assert set(AUTO_VECTOR_ENV.values()) <= set(EXACT_ENGINES)  # "auto" keeps trajectories
    assert resolve_vector_env("auto", CARTPOLE, restart_failed=True) == "rlflow"
    with pytest.raises(ConfigError, match="restart_failed_sub_environments=True needs rlflow"):
        resolve_vector_env("gymnasium", CARTPOLE, restart_failed=True)
    with pytest.raises(ConfigError, match="multi-agent envs needs rlflow"):
        resolve_vector_env("gymnasium-sync", CARTPOLE, multi_agent=True)
    venv = make_vector_env(CARTPOLE, 2, 0, vector_env="gymnasium")
    with pytest.raises(ConfigError, match="no single sub-envs"):
        _ = venv.envs
    venv.close()


@pytest.mark.skipif(not HAS_ENVPOOL, reason="envpool is not installed")
def test_envpool_refuses_envs_it_cannot_build_as_configured() -> None:
    wrapped = config_env_creator(
        PPOConfig(env="CartPole-v1", env_wrappers=["gymnasium.wrappers.ClipReward"])
    )
    with pytest.raises(ConfigError, match="vector_env='envpool': the env is an env creator"):
        resolve_vector_env("envpool", wrapped)
    with pytest.raises(ConfigError, match="'ALE/Pong-v5'"):
        resolve_vector_env("envpool", functools.partial(gym.make, "ALE/Pong-v5"))


def test_trainer_refuses_an_engine_without_restarts_before_any_actor_starts() -> None:
    with pytest.raises(ConfigError, match="vector_env='gymnasium-sync': restart_failed"):
        Trainer(
            "ppo", env="CartPole-v1", backend="local", num_workers=1,
            vector_env="gymnasium-sync", restart_failed_sub_environments=True,
        )  # fmt: skip


SMALL_PPO: dict[str, Any] = {
    "env": "CartPole-v1",
    "num_workers": 1,
    "num_envs_per_worker": 4,
    "rollout_fragment_length": 64,
    "train_batch_size": 256,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 1,
    "seed": 0,
}
COUNTS = ("num_env_steps_sampled", "episodes_this_iter", "episode_return_mean", "episode_len_mean")


@pytest.mark.parametrize("backend", ["local", pytest.param("ray", marks=pytest.mark.ray)])
def test_ppo_trains_with_gymnasium_engines(backend: str, request: pytest.FixtureRequest) -> None:
    if backend == "ray":
        request.getfixturevalue("ray_session")
    results = {}
    for engine in ("rlflow", "gymnasium-sync", "gymnasium"):
        with Trainer("ppo", backend=backend, vector_env=engine, **SMALL_PPO) as trainer:
            results[engine] = trainer.train()
    # The sync engine: the very same run as rlflow's loop.
    assert {k: results["gymnasium-sync"][k] for k in COUNTS} == {
        k: results["rlflow"][k] for k in COUNTS
    }
    assert results["rlflow"]["num_env_steps_sampled"] == 256
    # CartPoleVectorEnv: its reset rows are dropped, so one sampling round of 4 x 64 steps
    # gives fewer than 256 rows and a second round is sampled; every counted episode pays 1
    # a step (return = length: no reset row was counted in any episode).
    vec = results["gymnasium"]
    assert 256 < vec["num_env_steps_sampled"] < 512
    assert vec["num_env_steps_sampled"] == vec["num_env_steps_trained"]
    assert vec["episodes_this_iter"] > 0
    assert vec["episode_return_mean"] == vec["episode_len_mean"]

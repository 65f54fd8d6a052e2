"""``vector_env="ale-vector"``: ale_py's C++ ``AtariVectorEnv`` behind rlflow's DeepMind
preprocessing (`rlflow.envs.ale_vector`), against rlflow's own engine (issue 48 part 2)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from rlflow.envs.ale_vector import AleVectorEnv
from rlflow.envs.creator import config_env_creator, flatten_if_structured, make_env_creator
from rlflow.envs.gym_vector import make_vector_env, resolve_vector_env
from rlflow.errors import ConfigError

pytest.importorskip("ale_py.vector_env")
pytestmark = pytest.mark.timeout(240)


def _creator(env_id: str, **env_config: Any) -> Any:
    return functools.partial(flatten_if_structured, make_env_creator(env_id, **env_config))


def play(engine: str, env_id: str, games: int, *, num_envs: int = 4, **env_config: Any) -> Any:
    """Seeded random play until ``games`` whole games ended: (episode stats, rewards seen,
    terminated flags seen, dropped reset rows, observation space)."""
    venv = make_vector_env(_creator(env_id, **env_config), num_envs, 0, vector_env=engine)
    rng = np.random.default_rng(0)
    stats, rewards, terminated, dropped = [], [], 0, 0
    try:
        obs = venv.reset()
        assert obs.shape == (num_envs, 84, 84, 4) and obs.dtype == np.uint8
        while len(stats) < games:
            step = venv.step(rng.integers(0, venv.action_space.n, num_envs))
            live = np.ones(num_envs, dtype=bool)
            live[venv.restarted] = False
            dropped += len(venv.restarted)
            rewards.append(step.rewards[live])
            terminated += int(step.terminateds[live].sum())
            stats += venv.pop_episode_stats()
        return stats, np.concatenate(rewards), terminated, dropped, venv.observation_space
    finally:
        venv.close()


def test_pong_games_on_the_cpp_engine_match_rlflows_in_distribution() -> None:
    ale = play("ale-vector", "ALE/Pong-v5", 4)
    own = play("rlflow", "ALE/Pong-v5", 4)
    assert ale[4] == own[4]  # the same observation space: (84, 84, 4) uint8, channels last
    for stats, rewards, terminated, dropped, _ in (ale, own):
        returns = [s.return_ for s in stats]
        assert all(-21 <= r <= -15 for r in returns), returns  # a random player loses games
        assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0}
        assert terminated == len(stats)  # Pong has no lives: an episode is a game
    assert ale[3] == len(ale[0])  # each game's reset row was dropped, not sampled
    ale_len = np.mean([s.length for s in ale[0]])
    own_len = np.mean([s.length for s in own[0]])
    assert abs(ale_len - own_len) < 0.25 * own_len, (ale_len, own_len)
    ale_ret = np.mean([s.return_ for s in ale[0]])
    own_ret = np.mean([s.return_ for s in own[0]])
    assert abs(ale_ret - own_ret) < 1.5, (ale_ret, own_ret)


def test_a_lost_life_ends_the_learners_episode_and_the_stats_count_whole_games() -> None:
    stats, rewards, terminated, dropped, _ = play("ale-vector", "ALE/Breakout-v5", 6)
    # 5 lives a game: each lost life ended an episode for the learner, the game went on.
    assert terminated >= 5 * len(stats), (terminated, len(stats))
    assert dropped == len(stats)
    assert sum(s.return_ for s in stats) <= rewards.sum()  # games in progress hold the rest
    assert all(s.length > 100 for s in stats)  # whole games, not single lives


def test_without_episodic_life_and_clipping_the_learner_gets_the_games_own_rewards() -> None:
    stats, rewards, terminated, _, _ = play(
        "ale-vector", "ALE/Breakout-v5", 4, episodic_life=False, clip_rewards=False
    )
    assert terminated == len(stats)  # only game over ends an episode
    assert rewards.sum() >= sum(s.return_ for s in stats) > 0


def test_the_engine_is_chosen_only_where_it_can_serve_the_env() -> None:
    assert resolve_vector_env("ale-vector", _creator("ALE/Pong-v5")) == "ale-vector"
    assert resolve_vector_env("auto", _creator("ALE/Pong-v5")) == "rlflow"
    cases = {
        "CartPole-v1": {},
        "ALE/Pong-v5": {"deepmind": False},
    }
    for env_id, env_config in cases.items():
        with pytest.raises(ConfigError, match="vector_env='ale-vector'"):
            resolve_vector_env("ale-vector", _creator(env_id, **env_config))
    with pytest.raises(ConfigError, match=r"env_config keys \['mode'\]"):
        resolve_vector_env("ale-vector", _creator("ALE/Pong-v5", mode=1))


def test_a_ppo_config_builds_the_cpp_engine_in_its_workers() -> None:
    from rlflow.algorithms import PPOConfig

    config = PPOConfig(env="ALE/Pong-v5", vector_env="ale-vector", num_envs_per_worker=2)
    venv = make_vector_env(config_env_creator(config), 2, 0, vector_env=config.vector_env)
    try:
        assert isinstance(venv, AleVectorEnv)
        assert venv.reset().shape == (2, 84, 84, 4)
    finally:
        venv.close()

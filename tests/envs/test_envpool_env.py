"""``vector_env="envpool"``: EnvPool's C++ envs behind rlflow's engine interface
(`rlflow.envs.envpool_env`), Atari with rlflow's DeepMind preprocessing, against rlflow's own
engine (issue 48 part 2)."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlflow.data import REWARDS
from rlflow.envs.creator import config_env_creator, flatten_if_structured, make_env_creator
from rlflow.envs.envpool_env import EnvPoolAtariEnv
from rlflow.envs.gym_vector import GymVectorEnv, make_vector_env, resolve_vector_env
from rlflow.errors import ConfigError

pytest.importorskip("envpool")
pytest.importorskip("ale_py")
pytestmark = pytest.mark.timeout(240)


def _creator(env_id: str, **env_config: Any) -> Any:
    return functools.partial(flatten_if_structured, make_env_creator(env_id, **env_config))


def play(
    engine: str, env_id: str, games: int, *, num_envs: int = 4, seed: int = 0, **env_config: Any
) -> Any:
    """Seeded random play until ``games`` whole games ended: (episode stats, rewards seen,
    terminated flags seen, dropped reset rows, observation space)."""
    venv = make_vector_env(_creator(env_id, **env_config), num_envs, seed, vector_env=engine)
    rng = np.random.default_rng(seed)
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


def _means(stats: list[Any]) -> tuple[float, float]:
    return float(np.mean([s.length for s in stats])), float(np.mean([s.return_ for s in stats]))


def test_pong_games_on_envpool_match_rlflows_in_distribution() -> None:
    pool = play("envpool", "ALE/Pong-v5", 4)
    own = play("rlflow", "ALE/Pong-v5", 4)
    assert pool[4] == own[4]  # the same observation space: (84, 84, 4) uint8, channels last
    for stats, rewards, terminated, _, _ in (pool, own):
        returns = [s.return_ for s in stats]
        assert all(-21 <= r <= -15 for r in returns), returns  # a random player loses games
        assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0}
        assert terminated == len(stats)  # Pong has no lives: an episode is a game
    # Each game's reset row was dropped, not sampled (the games that ended on the last step
    # have theirs still to come).
    assert len(pool[0]) - 4 <= pool[3] <= len(pool[0]) and own[3] == 0
    (pool_len, pool_ret), (own_len, own_ret) = _means(pool[0]), _means(own[0])
    # Measured (2 seeds each): lengths 914-979 vs 934-953, returns -20.0..-19.25 vs the same.
    assert abs(pool_len - own_len) < 0.2 * own_len, (pool_len, own_len)
    assert abs(pool_ret - own_ret) < 1.5, (pool_ret, own_ret)


def test_breakout_lives_end_the_learners_episodes_and_the_stats_count_whole_games() -> None:
    pool = play("envpool", "ALE/Breakout-v5", 8)
    own = play("rlflow", "ALE/Breakout-v5", 8)
    stats, rewards, terminated, dropped, _ = pool
    # 5 lives a game: each lost life ended an episode for the learner, and the engine's
    # reset row after it (the game goes on) was dropped.
    assert terminated >= 5 * len(stats), (terminated, len(stats))
    assert terminated - 4 <= dropped <= terminated
    assert sum(s.return_ for s in stats) <= rewards.sum()  # games in progress hold the rest
    assert all(s.length > 100 for s in stats)  # whole games, not single lives
    # rlflow's engine presses FIRE after a lost life, as EnvPool's reset does: the games are
    # alike (measured, 2 seeds x 12 games: lengths 155-177 vs 155-157, scores 1.0-1.4 vs 1.1-1.2).
    (pool_len, pool_ret), (own_len, own_ret) = _means(pool[0]), _means(own[0])
    assert abs(pool_len - own_len) < 0.3 * own_len, (pool_len, own_len)
    assert abs(pool_ret - own_ret) < 1.5, (pool_ret, own_ret)


def test_without_episodic_life_and_clipping_the_learner_gets_the_games_own_rewards() -> None:
    stats, rewards, terminated, _, _ = play(
        "envpool", "ALE/Breakout-v5", 4, episodic_life=False, clip_rewards=False
    )
    assert terminated == len(stats)  # only game over ends an episode
    assert rewards.sum() >= sum(s.return_ for s in stats) > 0


def test_frames_are_channels_last_with_the_newest_last() -> None:
    venv = make_vector_env(_creator("ALE/Pong-v5"), 2, 0, vector_env="envpool")
    try:
        obs = venv.reset()
        moved = 0
        for _ in range(60):
            step = venv.step(np.full(2, 2))  # UP: the paddle moves, the frames change
            np.testing.assert_array_equal(step.next_obs[..., :-1], obs[..., 1:])
            moved += int(not np.array_equal(step.next_obs[..., -1], obs[..., -1]))
            obs = step.next_obs
        assert moved > 30
    finally:
        venv.close()


def test_the_frame_limit_truncates_a_game_and_ends_its_score() -> None:
    venv = make_vector_env(
        _creator("ALE/Pong-v5", max_num_frames_per_episode=400), 2, 0, vector_env="envpool"
    )
    try:
        venv.reset()
        truncated = 0
        for _ in range(205):
            step = venv.step(np.zeros(2, dtype=np.int64))
            live = np.ones(2, dtype=bool)
            live[venv.restarted] = False
            truncated += int(step.truncateds[live].sum())
        stats = venv.pop_episode_stats()
        assert truncated == 4 and [s.length for s in stats] == [100] * 4  # 400 frames / 4
    finally:
        venv.close()


def test_env_config_keys_map_onto_envpools_options() -> None:
    venv = make_vector_env(
        _creator("ALE/Breakout-v5", repeat_action_probability=0.25, frame_stack=2),
        2,
        7,
        vector_env="envpool",
    )
    try:
        assert isinstance(venv, EnvPoolAtariEnv)
        config = venv.venv.pool.config
        assert config["repeat_action_probability"] == 0.25 and config["stack_num"] == 2
        assert config["episodic_life"] and not config["reward_clip"] and config["seed"] == 7
        assert venv.reset().shape == (2, 84, 84, 2)
    finally:
        venv.close()


def test_cartpole_on_envpool_matches_rlflows_episodes_in_distribution() -> None:
    lengths = {}
    for engine in ("envpool", "rlflow"):
        venv = make_vector_env(functools.partial(gym.make, "CartPole-v1"), 8, 0, vector_env=engine)
        rng = np.random.default_rng(0)
        venv.reset()
        for _ in range(600):
            venv.step(rng.integers(0, 2, 8))
        stats = venv.pop_episode_stats()
        venv.close()
        assert all(s.return_ == s.length for s in stats)
        lengths[engine] = np.mean([s.length for s in stats])
    # A random CartPole policy lasts ~22 steps on both; EnvPool's reset rows cost a step each.
    assert abs(lengths["envpool"] - lengths["rlflow"]) < 0.15 * lengths["rlflow"], lengths


def test_the_engine_is_chosen_only_where_it_can_serve_the_env() -> None:
    assert resolve_vector_env("envpool", _creator("ALE/Pong-v5")) == "envpool"
    assert resolve_vector_env("envpool", _creator("CartPole-v1")) == "envpool"
    # "auto" keeps rlflow's engine: EnvPool's trajectories are not rlflow's (module docstring).
    assert resolve_vector_env("auto", _creator("ALE/Pong-v5")) == "rlflow"
    assert resolve_vector_env("auto", _creator("CartPole-v1")) == "rlflow"
    with pytest.raises(ConfigError, match=r"vector_env='envpool': env_config keys \['noop_max'\]"):
        resolve_vector_env("envpool", _creator("ALE/Pong-v5", noop_max=10))
    with pytest.raises(ConfigError, match="vector_env='envpool' needs the DeepMind"):
        resolve_vector_env("envpool", _creator("ALE/Pong-v5", deepmind=False))
    with pytest.raises(ConfigError, match=r"env_config keys \['sutton_barto_reward'\] are not"):
        resolve_vector_env("envpool", _creator("CartPole-v1", sutton_barto_reward=True))
    assert resolve_vector_env("envpool", _creator("CartPole-v1", max_episode_steps=9))
    with pytest.raises(ConfigError, match="vector_env='envpool': EnvPool has no env 'Taxi-v4'"):
        resolve_vector_env("envpool", _creator("Taxi-v4"))
    with pytest.raises(ConfigError, match="vector_env='envpool': 'ALE/Pong-v5' is made without"):
        resolve_vector_env("envpool", functools.partial(gym.make, "ALE/Pong-v5"))


def test_a_ppo_config_samples_atari_on_envpool_in_its_worker() -> None:
    from rlflow.algorithms import PPOConfig
    from rlflow.algorithms.ppo.policy import PPOPolicy
    from rlflow.workers.sampler import SamplerSpec
    from rlflow.workers.vector_sampler import VectorSampler

    config = PPOConfig(env="ALE/Pong-v5", vector_env="envpool", num_envs_per_worker=2)
    creator = config_env_creator(config)
    probe = creator()
    policy = PPOPolicy(probe.observation_space, probe.action_space, config, seed=0)
    probe.close()
    spec = SamplerSpec(creator, 2, multi_agent=False, seed=3, vector_env=config.vector_env)
    sampler = VectorSampler(spec, policy, itertools.count().__next__)
    try:
        batch = sampler.sample(20)
        assert isinstance(sampler.venv, GymVectorEnv) and isinstance(sampler.venv, EnvPoolAtariEnv)
        assert batch.count == 40 and batch["obs"].shape == (40, 84, 84, 4)
        assert batch["obs"].dtype == np.uint8
    finally:
        sampler.close()


def test_a_ppo_trainer_trains_on_envpool_and_drops_the_reset_rows(tmp_path: Any) -> None:
    from rlflow import Trainer

    with Trainer(
        "ppo",
        env="CartPole-v1",
        backend="local",
        num_workers=0,
        vector_env="envpool",
        num_envs_per_worker=4,
        rollout_fragment_length=50,
        train_batch_size=400,
        sgd_minibatch_size=100,
        num_sgd_iter=1,
    ) as trainer:
        result = trainer.train()
        worker = trainer.workers.local_worker()
        batch = worker.sample()
        venv = worker._sampler.venv
        assert isinstance(venv, GymVectorEnv) and type(venv.venv).__name__ == "EnvPoolVector"
        # The C++ state is not in the checkpoint: the restored worker starts new episodes.
        checkpoint = trainer.save(tmp_path / "ckpt")
        assert worker.get_state()["env"] is None
    with Trainer.restore(checkpoint, backend="local") as restored:
        again = restored.train()
        assert again["num_env_steps_sampled"] >= 800 and again["iteration"] == 2
    # CartPole pays 1 a step: a reset row (reward 0) in the batch would show as a 0.
    assert np.all(batch[REWARDS] == 1.0) and 150 <= batch.count < 200
    assert result["num_env_steps_sampled"] >= 400
    assert result["episodes_total"] > 0
    assert 8 <= result["episode_len_mean"] == result["episode_return_mean"]

"""Atari episode statistics are game scores: whole games, rewards before clipping."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlflow.envs import EpisodeStat, VectorEnv
from rlflow.envs.atari import wrap_deepmind
from rlflow.envs.game_score import GAME_SCORE, RecordGameScore, reports_game_score

pytestmark = pytest.mark.timeout(60)


class _Lives:
    def __init__(self, game: ThreeLivesGame) -> None:
        self.game = game

    def lives(self) -> int:
        return self.game.lives


class ThreeLivesGame(gym.Env[np.ndarray, int]):
    """Reward 3 per frame; a life is lost at frames 4 and 8, game over at frame 12."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 255, (6, 6, 3), np.uint8)
        self.action_space = spaces.Discrete(2)
        self.ale = _Lives(self)
        self.t = 0
        self.lives = 3

    def get_action_meanings(self) -> list[str]:
        return ["NOOP", "RIGHT"]  # no FIRE: no FireResetEnv

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t, self.lives = 0, 3
        return np.zeros((6, 6, 3), np.uint8), {}

    def step(self, action: int):
        self.t += 1
        if self.t in (4, 8):
            self.lives -= 1
        over = self.t >= 12
        if over:
            self.lives = 0
        return np.full((6, 6, 3), self.t, np.uint8), 3.0, over, False, {}


def _deepmind_game() -> gym.Env[Any, Any]:
    return wrap_deepmind(ThreeLivesGame(), noop_max=0, frame_skip=1, frame_stack=1, screen_size=6)


def test_record_game_score_reports_the_sum_at_game_over_only() -> None:
    env = RecordGameScore(ThreeLivesGame())
    env.reset(seed=0)
    infos = [env.step(0)[4] for _ in range(12)]
    assert [GAME_SCORE in info for info in infos] == [False] * 11 + [True]
    assert infos[-1][GAME_SCORE] == 36.0
    assert reports_game_score(_deepmind_game())
    assert not reports_game_score(gym.make("CartPole-v1"))


def test_vector_env_counts_whole_games_with_unclipped_scores() -> None:
    venv = VectorEnv(_deepmind_game, 1, seed=0)
    venv.reset()
    clipped, ends = [], 0
    for _ in range(10):  # 4 + 3 + 3 agent steps: a NOOP after each lost life is the reset's
        step = venv.step(np.array([1]))
        clipped.append(float(step.rewards[0]))
        ends += int(step.terminateds[0])
    assert ends == 3  # the learner sees an episode end at each lost life...
    assert set(clipped) == {1.0}  # ...and clipped rewards
    # ...while the statistics hold one game: 12 frames of reward 3, over 10 agent steps.
    assert venv.pop_episode_stats() == [EpisodeStat(36.0, 10)]
    venv.close()


def test_without_the_score_wrapper_statistics_would_be_per_life_and_clipped() -> None:
    # The same chain minus RecordGameScore: what episode_return_mean reported before.
    from rlflow.envs.atari import ClipRewardEnv, EpisodicLifeEnv

    venv = VectorEnv(lambda: ClipRewardEnv(EpisodicLifeEnv(ThreeLivesGame())), 1, seed=0)
    venv.reset()
    for _ in range(10):
        venv.step(np.array([1]))
    assert [e.return_ for e in venv.pop_episode_stats()] == [4.0, 3.0, 3.0]
    venv.close()

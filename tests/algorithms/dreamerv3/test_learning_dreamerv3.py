"""Learning tier: DreamerV3's actor learns in imagination (issue 47, part 2), on a small task.

The issue's figures (CartPole-v1 to 450, Pendulum-v1 to -300, beside PPO) are
``benchmarks/dreamerv3.py``'s: a train step of the XS model costs 0.2-0.35 CPU-seconds here,
beyond a CI budget. This test is the smaller target: a task whose reward needs the world model
to learn that it depends on the action (`Match`: a side shown in the observation, reward 1 for
the action naming it, 10-step episodes; random play returns 5). Measured on 2026-11-29 (2 cores,
load falling from 20 to 4) with these settings: the reward model leaves its plateau after about
350 train steps, the 100-episode mean return reached 7.06 at 1,600 env steps (710 train steps,
291 s) and 9.02 at 2,360 (337 s). The test asks for 7.0 within 3,000 env steps.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlflow.algorithms.dreamerv3 import DreamerV3Config
from rlflow.algorithms.dreamerv3.policy import DreamerV3Policy
from rlflow.algorithms.dreamerv3.replay import EpisodeReplay
from rlflow.data.sample_batch import (
    ACTIONS,
    EPS_ID,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    SampleBatch,
)
from rlflow.trainer import Trainer

pytestmark = [pytest.mark.learning, pytest.mark.timeout(900)]

TARGET = 7.0
BUDGET = 3_000


class Match(gym.Env[Any, Any]):
    """A side (0 or 1, one-hot) each step; reward 1 for the action naming it; 10 steps."""

    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t, self.side = 0, int(self.np_random.integers(2))
        return self._obs(), {}

    def _obs(self) -> Any:
        obs = np.zeros(2, np.float32)
        obs[self.side] = 1.0
        return obs

    def step(self, action: Any) -> Any:
        reward = float(int(action) == self.side)
        self.t += 1
        self.side = int(self.np_random.integers(2))
        return self._obs(), reward, False, self.t >= 10, {}


def test_dreamerv3_learns_an_action_dependent_reward_in_imagination(local_backend: None) -> None:
    trainer = Trainer(
        "dreamerv3",
        env=lambda _cfg=None: Match(),
        backend="local",
        num_workers=0,
        seed=0,
        batch_size=8,
        batch_length=16,
        imagination_horizon=5,
        train_ratio=64.0,
        learning_starts=200,
        lr=6e-4,
        actor_lr=3e-5,
        critic_lr=1e-4,
        rollout_fragment_length=4,
        min_steps_per_iteration=200,
    )
    best, steps = float("-inf"), 0
    try:
        while steps < BUDGET and best < TARGET:
            result = trainer.train()
            steps = result["num_env_steps_sampled"]
            if result["episode_return_mean"] is not None:
                best = max(best, result["episode_return_mean"])
    finally:
        trainer.stop()
    assert best >= TARGET, f"mean return {best} after {steps} env steps"


class PixelSide(gym.Env[Any, Any]):
    """A 16x16 grey image with a bright 4x4 square on the left or the right (drawn each step);
    reward 1 on arriving at an image with the square on the left; 10 steps."""

    observation_space = gym.spaces.Box(0, 255, (16, 16, 1), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t, self.side = 0, int(self.np_random.integers(2))
        return self._obs(), {}

    def _obs(self) -> Any:
        image = np.zeros((16, 16, 1), np.uint8)
        column = 2 if self.side == 0 else 10
        image[6:10, column : column + 4] = 255
        return image

    def step(self, action: Any) -> Any:
        self.t += 1
        self.side = int(self.np_random.integers(2))
        return self._obs(), float(self.side == 0), False, self.t >= 10, {}


def test_the_world_model_learns_pixels_and_their_reward() -> None:
    # Image observations through the CNN encoder and decoder: from random play, the world
    # model learns to rebuild the images and to read the reward off them (the square's side).
    # Measured on 2026-11-29 (2 cores, load about 14): the reward error leaves the marginal's
    # 0.47 after about 100 train steps and is 0.03 at 150; 250 steps took 23 CPU s (114 s wall).
    env = PixelSide()
    config = DreamerV3Config(batch_size=4, batch_length=16, imagination_horizon=5, lr=6e-4)
    policy = DreamerV3Policy(env.observation_space, env.action_space, config, seed=0)
    assert policy.model.kind == "image"
    codec = policy.model.codec
    replay = EpisodeReplay(10_000, codec.encode, codec.dim, seed=0)
    obs, _ = env.reset(seed=0)
    rows: dict[str, list[Any]] = {k: [] for k in (OBS, NEXT_OBS, ACTIONS, REWARDS, TERMINATEDS)}
    episodes, episode = [], 0
    for _ in range(400):
        action = int(env.action_space.sample())
        nxt, reward, term, trunc, _ = env.step(action)
        for k, v in zip(rows, (obs, nxt, action, reward, term), strict=True):
            rows[k].append(v)
        episodes.append(episode)
        obs = nxt
        if term or trunc:
            obs, _ = env.reset()
            episode += 1
    replay.add(SampleBatch({**{k: np.asarray(v) for k, v in rows.items()}, EPS_ID: episodes}))
    errors, recon = [], []
    for _ in range(200):
        stats = policy.learn(replay.sample(4, 16))
        errors.append(float(stats["reward_abs_error"]))
        recon.append(float(stats["reconstruction_loss"]))
    assert np.mean(errors[:10]) > 0.3  # the marginal's error at first (rewards 0 or 1)
    assert np.mean(errors[-20:]) < 0.1, errors[-20:]
    assert np.mean(recon[-20:]) < 0.1 * np.mean(recon[:10]), (recon[:10], recon[-20:])

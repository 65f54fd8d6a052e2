"""`rlflow/StatelessCartPole-v1`: CartPole-v1 seen without its velocities."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlflow import Trainer
from rlflow.envs import STATELESS_CARTPOLE_ID
from rlflow.envs.stateless import StatelessCartPole
from rlflow.setup import resolve_setup

pytestmark = pytest.mark.timeout(60)


def test_it_is_cartpole_observed_without_the_velocities() -> None:
    full, stateless = gym.make("CartPole-v1"), gym.make(STATELESS_CARTPOLE_ID)
    obs_full, _ = full.reset(seed=3)
    obs, _ = stateless.reset(seed=3)
    assert stateless.observation_space.shape == (2,)
    np.testing.assert_array_equal(
        stateless.observation_space.low, full.observation_space.low[[0, 2]]
    )
    rng = np.random.default_rng(0)
    steps = 0
    while True:
        np.testing.assert_array_equal(obs, obs_full[[0, 2]])
        assert stateless.observation_space.contains(obs)
        action = int(rng.integers(2))
        obs_full, r_full, term_full, trunc_full, _ = full.step(action)
        obs, reward, terminated, truncated, _ = stateless.step(action)
        steps += 1
        assert (reward, terminated, truncated) == (r_full, term_full, trunc_full)
        if terminated or truncated:
            break
    assert steps > 5
    assert full.spec is not None and stateless.spec is not None
    assert stateless.spec.max_episode_steps == 500  # CartPole-v1's limit, inside


def test_it_wraps_only_cartpole() -> None:
    with pytest.raises(ValueError, match="StatelessCartPole wraps a CartPole env"):
        StatelessCartPole(gym.make("Pendulum-v1"))


def test_the_cli_and_a_trainer_take_its_id(local_backend: None) -> None:
    setup = resolve_setup("ppo", env=STATELESS_CARTPOLE_ID)
    assert setup.config.env == STATELESS_CARTPOLE_ID
    fields = {"num_workers": 0, "train_batch_size": 128, "rollout_fragment_length": 64}
    with Trainer("ppo", env=STATELESS_CARTPOLE_ID, backend="local", **fields) as trainer:
        assert trainer.workers.local_worker().get_policy().observation_space.shape == (2,)
        assert trainer.train()["num_env_steps_trained"] == 128

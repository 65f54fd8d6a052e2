"""The common reward (EPyMARL's ``common_reward`` / ``reward_scalarisation``): every agent paid the
team's reward, the sum or mean of the step's rewards."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlflow.config.rollouts import RolloutConfig
from rlflow.envs import config_env_creator
from rlflow.envs.common_reward import CommonReward, common_reward
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentEnv, MultiAgentStep
from rlflow.errors import ConfigError


class Recorder(MultiAgentEnv):
    """Agents ``a``, ``b``, ``c`` (one observation value: the step count; Discrete(2)), paid
    1, 2 and 4 a step; ``b`` leaves after step 2, everyone after step 4."""

    def __init__(self) -> None:
        self.possible_agents = ["a", "b", "c"]
        box = spaces.Box(-10.0, 10.0, (1,), np.float32)
        self.observation_spaces = dict.fromkeys(self.possible_agents, box)
        self.action_spaces = {a: spaces.Discrete(2) for a in self.possible_agents}
        self.agents = []
        self.t = 0

    def _obs(self, agents: list[str]) -> dict[str, Any]:
        return {a: np.full(1, self.t, np.float32) for a in agents}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(self.agents), {a: {} for a in self.agents}

    def step(self, action_dict: Mapping[str, Any]) -> MultiAgentStep:
        self._check_action_keys(action_dict)
        self.t += 1
        acting = list(self.agents)
        leaving = set(acting) if self.t == 4 else {"b"} if self.t == 2 else set()
        rewards = {a: {"a": 1.0, "b": 2.0, "c": 4.0}[a] for a in acting}
        terms: dict[str, bool] = {a: a in leaving for a in acting}
        truncs: dict[str, bool] = dict.fromkeys(acting, False)
        self.agents = [a for a in acting if a not in leaving]
        terms[ALL_AGENTS] = not self.agents
        truncs[ALL_AGENTS] = False
        return MultiAgentStep(self._obs(acting), rewards, terms, truncs, {a: {} for a in acting})


def _rewards(env: MultiAgentEnv, steps: int = 4) -> list[dict[str, float]]:
    env.reset(seed=0)
    out = []
    for _ in range(steps):
        step = env.step({a: env.action_spaces[a].sample() for a in env.agents})
        out.append(step.rewards)
    return out


def test_every_agent_is_paid_the_sum_or_the_mean_of_the_steps_rewards() -> None:
    # Recorder pays a 1, b 2, c 4; b leaves after step 2.
    assert _rewards(CommonReward(Recorder(), "sum")) == [
        {"a": 7.0, "b": 7.0, "c": 7.0},
        {"a": 7.0, "b": 7.0, "c": 7.0},
        {"a": 5.0, "c": 5.0},
        {"a": 5.0, "c": 5.0},
    ]
    mean = _rewards(CommonReward(Recorder(), "mean"))
    assert mean[0] == pytest.approx({"a": 7 / 3, "b": 7 / 3, "c": 7 / 3})
    assert mean[3] == {"a": 2.5, "c": 2.5}
    # Everything but the rewards is the wrapped env's.
    env = CommonReward(Recorder(), "sum")
    obs, _ = env.reset(seed=0)
    env.step(dict.fromkeys(env.agents, 1))
    assert env.agents == ["a", "b", "c"]
    step = env.step(dict.fromkeys(env.agents, 1))
    assert env.agents == ["a", "c"] and step.terminateds == {
        "a": False,
        "b": True,
        "c": False,
        ALL_AGENTS: False,
    }
    assert set(step.obs) == set(obs) and np.array_equal(step.obs["b"], np.full(1, 2.0))


def test_the_config_applies_it_after_the_groups() -> None:
    config = RolloutConfig(
        env=Recorder, groups={"ab": ["a", "b"]}, common_reward=True, num_workers=0
    )
    env = config_env_creator(config)()
    assert isinstance(env, CommonReward)
    # The group is paid its members' sum (3), c its own (4); both then the whole 7.
    assert _rewards(env, 1) == [{"ab": 7.0, "c": 7.0}]
    plain = config_env_creator(RolloutConfig(env=Recorder, num_workers=0))()
    assert _rewards(plain, 1) == [{"a": 1.0, "b": 2.0, "c": 4.0}]


def test_bad_values_and_single_agent_envs_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"RolloutConfig\.reward_scalarisation='total': must be"):
        RolloutConfig(common_reward=True, reward_scalarisation="total")
    with pytest.raises(ConfigError, match=r"RolloutConfig\.common_reward='yes' must be True or"):
        RolloutConfig(common_reward="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'sum', 'mean'"):
        CommonReward(Recorder(), "max")
    with pytest.raises(ConfigError, match="common_reward: the env is single-agent"):
        common_reward(lambda: gym.make("CartPole-v1"), "sum")


def test_independent_learners_train_on_the_common_reward() -> None:
    import rlflow

    trainer = rlflow.Trainer(
        "ppo",
        env=Recorder,
        common_reward=True,
        num_workers=0,
        rollout_fragment_length=8,
        train_batch_size=8,
        sgd_minibatch_size=8,
        num_sgd_iter=1,
        backend="local",
    )
    try:
        batch = trainer.workers.local_worker().sample()
        rewards = batch.policy_batches["default_policy"]["rewards"]
        # Two 4-step episodes: 3 agents paid 7 twice, then 2 paid 5 twice, in each.
        assert sorted(rewards.tolist()) == [5.0] * 8 + [7.0] * 12
    finally:
        trainer.stop()

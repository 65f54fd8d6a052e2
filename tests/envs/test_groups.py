"""Agent groups (`rlflow.envs.groups`): the team's layout, state, reward, joint actions, and
the errors for groups that cannot be."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from rlflow.config.rollouts import check_groups
from rlflow.envs.flatten import FlattenMultiAgentObservations
from rlflow.envs.groups import GroupAgents, TeamBox, group_agents
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentEnv, MultiAgentStep
from rlflow.errors import ConfigError


class Recorder(MultiAgentEnv):
    """Three agents: ``a`` and ``b`` (obs sizes 2 and 3, Discrete(3)) and ``c`` (obs size 1,
    Discrete(2)); observations hold the step count; rewards 1, 2, 4; ``b`` leaves after step 2,
    everyone after step 4. Records the actions it gets."""

    def __init__(self, masked: bool = False) -> None:
        self.possible_agents = ["a", "b", "c"]
        sizes = {"a": 2, "b": 3, "c": 1}
        self.masked = masked

        def obs_space(n: int) -> spaces.Space[Any]:
            box = spaces.Box(-10.0, 10.0, (n,), np.float32)
            if not masked:
                return box
            return spaces.Dict({"observation": box, "action_mask": spaces.Box(0, 1, (3,), np.int8)})

        self.observation_spaces = {a: obs_space(n) for a, n in sizes.items()}
        self.action_spaces = {"a": spaces.Discrete(3), "b": spaces.Discrete(3)}
        self.action_spaces["c"] = spaces.Discrete(3 if masked else 2)
        self.sizes = sizes
        self.agents = []
        self.actions: list[dict[str, Any]] = []
        self.t = 0

    def _obs(self, agents: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for agent in agents:
            value = np.full(self.sizes[agent], self.t, np.float32)
            if self.masked:
                out[agent] = {"observation": value, "action_mask": np.array([1, 0, 1], np.int8)}
            else:
                out[agent] = value
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(self.agents), {a: {} for a in self.agents}

    def step(self, action_dict: Mapping[str, Any]) -> MultiAgentStep:
        self._check_action_keys(action_dict)
        self.actions.append(dict(action_dict))
        self.t += 1
        acting = list(self.agents)
        leaving = {"b"} if self.t == 2 else set()
        if self.t == 4:
            leaving = set(acting)
        rewards = {a: {"a": 1.0, "b": 2.0, "c": 4.0}[a] for a in acting}
        terms = {a: a in leaving for a in acting}
        truncs = {a: False for a in acting}
        self.agents = [a for a in acting if a not in leaving]
        terms[ALL_AGENTS] = not self.agents
        truncs[ALL_AGENTS] = False
        return MultiAgentStep(self._obs(acting), rewards, terms, truncs, {a: {} for a in acting})


def test_team_layout_pads_members_and_concatenates_observations_as_state() -> None:
    env = GroupAgents(Recorder(), {"team": ["a", "b"]})
    assert env.possible_agents == ["team", "c"]
    space = env.observation_spaces["team"]
    assert isinstance(space, TeamBox)
    assert (space.num_agents, space.agent_obs_size, space.agent_mask_size) == (2, 3, 0)
    assert space.state_size == 5 and space.shape == (11,)
    assert space.agent_obs_sizes == [2, 3]  # each member's own, without the padding
    assert env.action_spaces["team"] == spaces.MultiDiscrete([3, 3])
    assert env.observation_spaces["c"] == spaces.Box(-10.0, 10.0, (1,), np.float32)
    obs, infos = env.reset(seed=0)
    assert sorted(obs) == ["c", "team"] and sorted(infos["team"]) == ["a", "b"]
    step = env.step({"team": np.array([2, 1]), "c": 1})
    # a: [1, 1] padded to 3; b: [1, 1, 1]; state: both unpadded side by side.
    assert step.obs["team"].tolist() == [1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1]
    parts = space.split(step.obs["team"][None])
    assert parts.agents.shape == (1, 2, 3) and parts.masks is None
    assert parts.state.tolist() == [[1, 1, 1, 1, 1]]
    assert env.env.actions[-1] == {"a": 2, "b": 1, "c": 1}  # type: ignore[attr-defined]
    assert step.rewards == {"team": 3.0, "c": 4.0}


def test_member_that_leaves_observes_zeros_and_its_actions_are_ignored() -> None:
    inner = Recorder()
    env = GroupAgents(inner, {"team": ["a", "b"]})
    env.reset(seed=0)
    env.step({"team": [0, 0], "c": 0})
    step = env.step({"team": [1, 1], "c": 0})  # b leaves here (terminated)
    assert step.terminateds["team"] is False and "team" in env.agents
    assert step.obs["team"][3:6].tolist() == [2, 2, 2]  # b's last observation
    step = env.step({"team": [2, 2], "c": 1})
    assert inner.actions[-1] == {"a": 2, "c": 1}  # b's action dropped
    assert step.obs["team"][3:6].tolist() == [0, 0, 0] and step.rewards["team"] == 1.0
    step = env.step({"team": [0, 0], "c": 0})
    assert step.terminateds == {"team": True, "c": True, ALL_AGENTS: True}
    assert env.agents == []


def test_member_action_masks_follow_each_members_observation() -> None:
    env = GroupAgents(
        FlattenMultiAgentObservations(Recorder(masked=True)), {"all": ["a", "b", "c"]}
    )
    space = env.observation_spaces["all"]
    assert isinstance(space, TeamBox)
    assert (space.agent_obs_size, space.agent_mask_size, space.state_size) == (3, 3, 6)
    obs, _ = env.reset(seed=0)
    parts = space.split(obs["all"])
    assert parts.masks.tolist() == [[1, 0, 1]] * 3
    assert parts.agents.tolist() == [[0, 0, 0]] * 3


def test_state_comes_from_the_pettingzoo_env_when_it_has_one() -> None:
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3

    raw = simple_spread_v3.parallel_env(max_cycles=5)
    env = group_agents(lambda: raw, {"team": ["agent_0", "agent_1", "agent_2"]})
    space = env.observation_spaces["team"]
    assert isinstance(space, TeamBox) and space.state_size == 54
    obs, _ = env.reset(seed=3)
    assert np.array_equal(space.split(obs["team"]).state, raw.state())
    total = 0.0
    for _ in range(5):
        step = env.step({"team": np.array([1, 2, 3])})
        assert np.array_equal(space.split(step.obs["team"]).state, raw.state())
        total += step.rewards["team"]
    assert step.truncateds["team"] is True and step.terminateds["team"] is False
    assert env.agents == [] and total < 0


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"team": ["a", "z"]}, "groups.team: agents ['z'] are not agents of the env"),
        ({"c": ["a", "b"]}, "group id 'c' is also the id of an agent in no group"),
        ({"team": ["a", "b"], "solo": ["a"]}, "agent 'a' is in two groups"),
        ({"team": []}, "must be a non-empty list"),
    ],
)
def test_groups_that_cannot_be_are_refused(groups: dict[str, list[str]], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        GroupAgents(Recorder(), groups)


def test_turn_based_single_agent_and_mixed_action_envs_are_refused() -> None:
    from pettingzoo.classic import tictactoe_v3

    with pytest.raises(ConfigError, match="turn-based"):
        group_agents(tictactoe_v3.env, {"t": ["player_1", "player_2"]})
    import gymnasium as gym

    with pytest.raises(ConfigError, match="single-agent"):
        group_agents(lambda: gym.make("CartPole-v1"), {"t": ["x"]})
    mixed = Recorder()
    mixed.action_spaces["b"] = spaces.Box(-1.0, 1.0, (2,), np.float32)
    with pytest.raises(ConfigError, match="all Discrete or all one-dimensional Box"):
        GroupAgents(mixed, {"team": ["a", "b"]})


def test_config_checks_groups_before_any_env_is_built() -> None:
    from rlflow.algorithms.ppo import PPOConfig

    with pytest.raises(ConfigError, match=r"PPOConfig\.groups: agent 'x' is in two groups"):
        PPOConfig(env="multi_cartpole", groups={"g": ["x"], "h": ["x"]})
    assert check_groups({"g": ("a", "b")}) == {"g": ["a", "b"]}


def test_any_algorithm_trains_a_group_as_one_agent_with_a_joint_action() -> None:
    import rlflow

    trainer = rlflow.Trainer(
        "ppo",
        env="multi_cartpole",
        env_config={"num_agents": 2},
        groups={"pair": ["agent_0", "agent_1"]},
        num_workers=0,
        rollout_fragment_length=64,
        train_batch_size=128,
        sgd_minibatch_size=64,
        num_sgd_iter=1,
        backend="local",
    )
    try:
        policy = trainer.workers.local_worker().get_policy()
        assert isinstance(policy.observation_space, TeamBox)
        assert policy.action_space == spaces.MultiDiscrete([2, 2])
        result = trainer.train()
        # One row per team step: the agent steps (the team's rows) are the env steps.
        assert result["num_agent_steps_trained"] == result["num_env_steps_sampled"] == 128
        assert result["episodes_this_iter"] > 0
        # The team's reward sums its poles' (1 per step each while up); the episode lasts
        # until both fell: its return lies between its length and twice its length.
        length, ret = result["episode_len_mean"], result["episode_return_mean"]
        assert length < ret <= 2 * length
        assert result["team_return_mean/pair"] == ret  # the team's return leads the line
        evaluation = trainer.evaluate(num_episodes=2)
        assert evaluation["team_return_mean"]["pair"] == evaluation["episode_return_mean"]
    finally:
        trainer.stop()

"""The dict-based multi-agent API: shipped envs, the PettingZoo adapter, the registry."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlflow.envs.ma_envs import (
    MULTI_AGENT_ENVS,
    MultiAgentCartPole,
    TwoTeamGrid,
    make_multi_agent_env,
)
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentEnv, from_pettingzoo
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(120)


def test_cartpole_matches_single_envs_seeded_alike() -> None:
    env = MultiAgentCartPole(num_agents=2)
    singles = [gym.make("CartPole-v1") for _ in range(2)]
    obs, _ = env.reset(seed=10)
    for i, single in enumerate(singles):
        np.testing.assert_array_equal(obs[f"agent_{i}"], single.reset(seed=10 + i)[0])
    rng = np.random.default_rng(0)
    for _ in range(15):
        actions = {agent: int(rng.integers(2)) for agent in env.agents}
        step = env.step(actions)
        for i, single in enumerate(singles):
            agent = f"agent_{i}"
            if agent not in actions:
                continue
            ob, reward, terminated, truncated, _ = single.step(actions[agent])
            np.testing.assert_array_equal(step.obs[agent], ob)
            assert step.rewards[agent] == reward
            assert (step.terminateds[agent], step.truncateds[agent]) == (terminated, truncated)


def test_cartpole_agents_leave_independently() -> None:
    env = MultiAgentCartPole(num_agents=2)
    env.reset(seed=0)
    # Pushing pole 0 right every step makes it fall within ~10 steps; pole 1 alternates.
    t = 0
    while "agent_0" in env.agents:
        step = env.step({"agent_0": 1, "agent_1": t % 2})
        t += 1
        assert not step.terminateds[ALL_AGENTS] and not step.truncateds[ALL_AGENTS]
    assert step.terminateds["agent_0"] and not step.terminateds["agent_1"]
    assert "agent_0" in step.obs  # the leaving agent gets its last observation ...
    assert env.agents == ["agent_1"]
    step = env.step({"agent_1": 0})
    assert set(step.obs) == {"agent_1"}  # ... and nothing after that
    assert set(step.rewards) == {"agent_1"}
    with pytest.raises(ConfigError, match="active agents are"):
        env.step({"agent_0": 0, "agent_1": 0})
    while env.agents:
        step = env.step({"agent_1": 1})
    assert step.terminateds[ALL_AGENTS] and not step.truncateds[ALL_AGENTS]
    obs, _ = env.reset()
    assert sorted(obs) == ["agent_0", "agent_1"]


def test_cartpole_truncation_sets_all_in_truncateds() -> None:
    env = MultiAgentCartPole(num_agents=1)
    env.envs["agent_0"] = gym.make("CartPole-v1", max_episode_steps=3)
    env.reset(seed=0)
    flags = [env.step({"agent_0": t % 2}) for t in range(3)][-1]
    assert flags.truncateds == {"agent_0": True, ALL_AGENTS: True}
    assert flags.terminateds == {"agent_0": False, ALL_AGENTS: False}


def test_two_team_grid_first_team_on_goal_wins() -> None:
    env = TwoTeamGrid(size=5, max_steps=20)
    obs, _ = env.reset(seed=1)
    assert all(env.observation_spaces[a].contains(ob) for a, ob in obs.items())
    goal_row = round(float(obs["red_0"][8]) * 4)
    assert obs["red_0"][9] == 0.5  # the goal is in the middle column
    # red_0 walks from (0, 0): down to the goal row, then right twice; everyone else stays.
    route = [2] * goal_row + [4, 4]
    for k, move in enumerate(route):
        step = env.step({"red_0": move, "red_1": 0, "blue_0": 0, "blue_1": 0})
        done = k == len(route) - 1
        assert step.terminateds[ALL_AGENTS] == done
    assert step.rewards == {"red_0": 1.0, "red_1": 1.0, "blue_0": -1.0, "blue_1": -1.0}
    assert env.agents == []


def test_two_team_grid_draw_and_time_limit() -> None:
    env = TwoTeamGrid(size=3, max_steps=10)
    obs, _ = env.reset(seed=0)
    goal_row = round(float(obs["red_0"][8]) * 2)
    # red_0 from (0, 0) and blue_0 from (0, 2) go down to the goal row, then step onto the goal
    # (the middle column) together: a draw.
    for _ in range(goal_row):
        env.step({"red_0": 2, "red_1": 0, "blue_0": 2, "blue_1": 0})
    step = env.step({"red_0": 4, "red_1": 0, "blue_0": 3, "blue_1": 0})
    assert step.terminateds[ALL_AGENTS] and set(step.rewards.values()) == {0.0}
    short = TwoTeamGrid(size=3, max_steps=2)
    short.reset(seed=0)
    first = short.step(dict.fromkeys(short.agents, 0))
    last = short.step(dict.fromkeys(short.agents, 0))
    assert not first.truncateds[ALL_AGENTS]
    assert last.truncateds[ALL_AGENTS] and not last.terminateds[ALL_AGENTS]
    assert short.agents == []


def test_two_team_grid_goal_is_seeded() -> None:
    def goals(seed: int) -> list[float]:
        env = TwoTeamGrid()
        first = env.reset(seed=seed)[0]["red_0"][8]
        return [float(first)] + [float(env.reset()[0]["red_0"][8]) for _ in range(5)]

    assert goals(3) == goals(3)


def test_registry_builds_by_name_and_suggests() -> None:
    env = make_multi_agent_env("multi_cartpole", num_agents=3)
    assert isinstance(env, MultiAgentEnv) and len(env.possible_agents) == 3
    assert "multi_cartpole" in MULTI_AGENT_ENVS
    with pytest.raises(ConfigError, match="did you mean 'multi_cartpole'"):
        make_multi_agent_env("multi_cartpol")
    assert isinstance(make_multi_agent_env(TwoTeamGrid, size=3), TwoTeamGrid)
    with pytest.raises(ConfigError, match="neither a PettingZoo"):
        make_multi_agent_env(lambda: gym.make("CartPole-v1"))


def test_pettingzoo_parallel_env_adapter() -> None:
    pettingzoo = pytest.importorskip("pettingzoo")
    env = from_pettingzoo(pettingzoo.make("parallel", "classic/rps-v2", max_cycles=2))
    assert env.possible_agents == ["player_0", "player_1"]
    assert env.action_spaces["player_0"] == gym.spaces.Discrete(3)
    obs, infos = env.reset(seed=0)
    assert sorted(obs) == sorted(infos) == ["player_0", "player_1"]
    # Rock (0) beats scissors (2).
    step = env.step({"player_0": 0, "player_1": 2})
    assert step.rewards == {"player_0": 1.0, "player_1": -1.0}
    assert not step.truncateds[ALL_AGENTS]
    step = env.step({"player_0": 1, "player_1": 1})
    assert step.rewards == {"player_0": 0.0, "player_1": 0.0}
    assert step.truncateds == {"player_0": True, "player_1": True, ALL_AGENTS: True}
    assert step.terminateds[ALL_AGENTS] is False and env.agents == []


def test_pettingzoo_aec_env_goes_through_aec_to_parallel() -> None:
    pettingzoo = pytest.importorskip("pettingzoo")
    env = make_multi_agent_env(lambda: pettingzoo.make("aec", "classic/rps-v2", max_cycles=5))
    env.reset(seed=0)
    step = env.step({"player_0": 2, "player_1": 0})  # scissors lose to rock
    assert step.rewards == {"player_0": -1.0, "player_1": 1.0}


def test_a_turn_based_aec_game_is_played_turn_by_turn() -> None:
    pytest.importorskip("pettingzoo")
    from pettingzoo.classic import tictactoe_v3

    env = from_pettingzoo(tictactoe_v3.env())
    obs, _ = env.reset(seed=0)
    assert list(obs) == env.agents == ["player_1"]
    # X (player_1) takes the left column (squares 0, 1, 2); O answers in 3 and 4.
    moves = [("player_1", 0), ("player_2", 3), ("player_1", 1), ("player_2", 4)]
    for agent, square in moves:
        assert env.agents == [agent] and obs[agent]["action_mask"][square] == 1
        step = env.step({agent: square})
        obs = step.obs
        assert not step.terminateds["__all__"] and step.rewards == dict.fromkeys(
            ["player_1", "player_2"], 0.0
        )
    with pytest.raises(ConfigError, match="active agents are \\['player_1'\\]"):
        env.step({"player_2": 5})
    final = env.step({"player_1": 2})  # three in a column: X wins
    assert final.rewards == {"player_1": 1.0, "player_2": -1.0}
    assert final.terminateds == {"player_1": True, "player_2": True, "__all__": True}
    assert sorted(final.obs) == ["player_1", "player_2"] and env.agents == []

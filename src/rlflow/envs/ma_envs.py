"""Shipped multi-agent test envs and the registry the CLI looks names up in.

- `MultiAgentCartPole`: N independent CartPole-v1 poles, one per agent (agents leave one by one).
- `TwoTeamGrid`: 2 vs 2 on a small grid; the first team on the goal cell wins.
- `TwoStepGame`: the two-step cooperative matrix game of the QMIX paper (optimal return 8).

`make_multi_agent_env` builds one from a registered name (`MULTI_AGENT_ENVS`) or a creator.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.checks import check_int
from rlflow.envs.multi_agent import (
    ALL_AGENTS,
    AgentID,
    MultiAgentDict,
    MultiAgentEnv,
    MultiAgentStep,
    from_pettingzoo,
)
from rlflow.errors import ConfigError

logger = logging.getLogger(__name__)


class MultiAgentCartPole(MultiAgentEnv):
    """``num_agents`` independent CartPole-v1 envs, agent ``agent_i`` balancing pole ``i``.

    `reset` with a ``seed`` resets pole ``i`` with ``seed + i``, so agent ``i`` sees exactly
    what ``gym.make("CartPole-v1")`` reset with ``seed + i`` would. Each agent's episode ends
    on its own (the pole falls: terminated; 500 steps: truncated) and the agent then leaves.
    `ALL_AGENTS` becomes True when every agent has left: in ``terminateds`` if none was
    truncated, else in ``truncateds``.

    With ``respawn=True`` an agent that left re-joins one step later with a fresh pole (it is
    absent from the step in between), and the episode ends only after ``horizon`` env steps
    (every agent still in it is truncated). Each pole's life is then one agent episode: no
    agent waits idle for the others, so every agent gets about one row per env step.

    Example:
        >>> env = MultiAgentCartPole(num_agents=2)
        >>> obs, _ = env.reset(seed=0)
        >>> sorted(obs)
        ['agent_0', 'agent_1']
        >>> env.step({"agent_0": 0, "agent_1": 1}).terminateds
        {'agent_0': False, 'agent_1': False, '__all__': False}
    """

    def __init__(self, num_agents: int = 2, *, respawn: bool = False, horizon: int = 1000) -> None:
        """Make ``num_agents >= 1`` CartPole-v1 envs (``horizon`` >= 1 is used with respawn)."""
        check_int(num_agents, "MultiAgentCartPole: num_agents", low=1)
        check_int(horizon, "MultiAgentCartPole: horizon", low=1)
        self.respawn = bool(respawn)
        """Agents re-join with a fresh pole one step after leaving."""
        self.horizon = horizon
        """Env steps per episode with ``respawn``."""
        self._t = 0
        self._dead: list[AgentID] = []
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.agents = []
        self.envs: dict[AgentID, gym.Env[Any, Any]] = {
            agent: gym.make("CartPole-v1") for agent in self.possible_agents
        }
        """One CartPole-v1 per agent."""
        self.observation_spaces = {a: env.observation_space for a, env in self.envs.items()}
        self.action_spaces = {a: env.action_space for a, env in self.envs.items()}
        self._any_truncated = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset every pole (pole ``i`` with ``seed + i``); every agent acts."""
        obs: MultiAgentDict = {}
        infos: MultiAgentDict = {}
        for i, (agent, env) in enumerate(self.envs.items()):
            obs[agent], infos[agent] = env.reset(
                seed=None if seed is None else seed + i, options=options
            )
        self.agents = list(self.possible_agents)
        self._any_truncated = False
        self._t = 0
        self._dead = []
        return obs, infos

    def step(self, action_dict: Mapping[AgentID, Any]) -> MultiAgentStep:
        """Step the pole of each active agent; agents whose episode ends leave."""
        self._check_action_keys(action_dict)
        result = MultiAgentStep({}, {}, {}, {}, {})
        self._t += 1
        end_of_horizon = self.respawn and self._t >= self.horizon
        for agent in self.agents:
            ob, reward, terminated, truncated, info = self.envs[agent].step(action_dict[agent])
            truncated = truncated or (end_of_horizon and not terminated)
            result.obs[agent], result.rewards[agent], result.infos[agent] = ob, float(reward), info
            result.terminateds[agent], result.truncateds[agent] = terminated, truncated
            self._any_truncated = self._any_truncated or truncated
        rejoin = [] if end_of_horizon else self._dead
        for agent in rejoin:  # left in the previous step: back with a fresh pole
            result.obs[agent], result.infos[agent] = self.envs[agent].reset()
            result.rewards[agent] = 0.0
            result.terminateds[agent] = result.truncateds[agent] = False
        left = [a for a in self.agents if result.terminateds[a] or result.truncateds[a]]
        self.agents = [a for a in self.agents if a not in left] + rejoin
        # At the horizon nobody comes back: the episode ends in this step.
        self._dead = left if self.respawn and not end_of_horizon else []
        over = not self.agents and not self._dead
        result.terminateds[ALL_AGENTS] = over and not self._any_truncated
        result.truncateds[ALL_AGENTS] = over and self._any_truncated
        return result

    def close(self) -> None:
        """Close every pole's env."""
        for env in self.envs.values():
            env.close()


# Moves of TwoTeamGrid as (row, column) offsets: stay, up, down, left, right.
_MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.int64)


class TwoTeamGrid(MultiAgentEnv):
    """Two teams of two on a ``size x size`` grid: the first team to reach the goal cell wins.

    Agents ``red_0``, ``red_1`` start in the left corners, ``blue_0``, ``blue_1`` in the right
    ones. The goal is drawn per episode from the middle column, so both teams are equally far.
    Actions ``Discrete(5)``: stay, up, down, left, right; all agents move at once, walls stop
    them, cells may be shared. Rewards are shared within a team (cooperative) and opposite
    across teams (competitive): when agents of one team only are on the goal, that team gets
    +1 per agent and the other -1, and every agent terminates; both teams at once is a draw
    (0 each, terminated). After ``max_steps`` steps everyone is truncated with reward 0.
    Observations (float32, in [0, 1]) are the ``(row, col)`` of: self, teammate, the two
    opponents (in id order), goal, divided by ``size - 1``.

    Example:
        >>> env = TwoTeamGrid()
        >>> obs, _ = env.reset(seed=0)
        >>> sorted(obs), obs["red_0"].shape
        (['blue_0', 'blue_1', 'red_0', 'red_1'], (10,))
    """

    TEAMS: ClassVar[Mapping[str, tuple[AgentID, AgentID]]] = {
        "red": ("red_0", "red_1"),
        "blue": ("blue_0", "blue_1"),
    }
    """Agent ids of each team."""

    def __init__(self, size: int = 5, max_steps: int = 20) -> None:
        """Make a ``size x size`` grid (odd, >= 3); episodes last at most ``max_steps``."""
        if check_int(size, "TwoTeamGrid: size (odd, for a fair goal)", low=3) % 2 == 0:
            raise ConfigError(f"TwoTeamGrid: size={size!r} must be an odd int >= 3 (fair goal)")
        check_int(max_steps, "TwoTeamGrid: max_steps", low=1)
        self.size = size
        """Side of the grid, in cells."""
        self.max_steps = max_steps
        """Steps after which the episode is truncated."""
        self.possible_agents = [*self.TEAMS["red"], *self.TEAMS["blue"]]
        self.agents = []
        box = spaces.Box(0.0, 1.0, (10,), np.float32)
        self.observation_spaces = {a: box for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(len(_MOVES)) for a in self.possible_agents}
        last = size - 1
        self._starts = np.array([[0, 0], [last, 0], [0, last], [last, last]], dtype=np.int64)
        self._positions = self._starts.copy()
        self._goal = np.array([size // 2, size // 2], dtype=np.int64)
        self._t = 0
        self._rng = np.random.default_rng()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Put the agents in their corners and draw the goal's row (seeded by ``seed``)."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._positions = self._starts.copy()
        self._goal = np.array([self._rng.integers(self.size), self.size // 2], dtype=np.int64)
        self._t = 0
        self.agents = list(self.possible_agents)
        return self._observations(), {a: {} for a in self.agents}

    def step(self, action_dict: Mapping[AgentID, Any]) -> MultiAgentStep:
        """Move every agent at once, then score the goal and check the time limit."""
        self._check_action_keys(action_dict)
        for i, agent in enumerate(self.possible_agents):
            action = int(action_dict[agent])
            if not 0 <= action < len(_MOVES):
                raise ConfigError(f"TwoTeamGrid.step: action {action!r} of {agent} not in 0..4")
            self._positions[i] = np.clip(self._positions[i] + _MOVES[action], 0, self.size - 1)
        self._t += 1
        on_goal = (self._positions == self._goal).all(axis=1)
        red, blue = bool(on_goal[:2].any()), bool(on_goal[2:].any())
        score = 0.0 if red == blue else (1.0 if red else -1.0)
        rewards = {a: score if a in self.TEAMS["red"] else -score for a in self.possible_agents}
        terminated = red or blue
        truncated = not terminated and self._t >= self.max_steps
        obs = self._observations()
        if terminated or truncated:
            self.agents = []
        return MultiAgentStep(
            obs,
            rewards,
            {**dict.fromkeys(obs, terminated), ALL_AGENTS: terminated},
            {**dict.fromkeys(obs, truncated), ALL_AGENTS: truncated},
            {a: {} for a in obs},
        )

    def _observations(self) -> dict[AgentID, npt.NDArray[np.float32]]:
        """Each agent's view: self, teammate, opponents, goal, scaled to [0, 1]."""
        scale = 1.0 / (self.size - 1)
        goal = self._goal * scale
        cells = self._positions * scale
        order = {0: (0, 1, 2, 3), 1: (1, 0, 2, 3), 2: (2, 3, 0, 1), 3: (3, 2, 0, 1)}
        return {
            agent: np.concatenate([cells[list(order[i])].ravel(), goal]).astype(np.float32)
            for i, agent in enumerate(self.possible_agents)
        }


class TwoStepGame(MultiAgentEnv):
    """The two-step cooperative matrix game of Rashid et al., "QMIX" (ICML 2018), section 6.1.

    Two agents, ``agent_0`` and ``agent_1``, two actions each (``Discrete(2)``: A = 0,
    B = 1). In state 1 nothing is paid and ``agent_0``'s action alone picks the next state:
    A leads to 2A, B to 2B. In state 2A every joint action pays 7; in state 2B the joint action
    ``(a_0, a_1)`` pays ``[[0, 1], [1, 8]][a_0][a_1]``; then the episode ends (terminated).
    Both agents observe the state, one-hot (state 1, 2A, 2B); the global state
    (:meth:`state`, ``state_space``) is the same one-hot. The optimal joint return is 8
    (B, then (B, B)); learners that see each agent's value separately (independent Q-learning,
    VDN) under uniform exploration prefer the safe 7 of 2A.

    Each agent is paid ``payoff / 2``, so the team reward of a group of both
    (`rlflow.envs.groups`: the sum of its members' rewards) and the sum of both agents'
    rewards are the paper's payoff.

    Example:
        >>> env = TwoStepGame()
        >>> obs, _ = env.reset(seed=0)
        >>> obs["agent_0"].tolist()
        [1.0, 0.0, 0.0]
        >>> step = env.step({"agent_0": 1, "agent_1": 0})
        >>> step.obs["agent_1"].tolist(), step.rewards["agent_0"]
        ([0.0, 0.0, 1.0], 0.0)
        >>> step = env.step({"agent_0": 1, "agent_1": 1})
        >>> step.rewards["agent_0"] + step.rewards["agent_1"], step.terminateds["__all__"]
        (8.0, True)
    """

    PAYOFF_2B: ClassVar[tuple[tuple[float, float], tuple[float, float]]] = ((0.0, 1.0), (1.0, 8.0))
    """Payoff of state 2B, ``[a_0][a_1]``."""
    PAYOFF_2A: ClassVar[float] = 7.0
    """Payoff of state 2A, whatever the joint action."""

    def __init__(self) -> None:
        """Two agents in state 1 (``reset`` starts an episode)."""
        self.possible_agents = ["agent_0", "agent_1"]
        self.agents = []
        box = spaces.Box(0.0, 1.0, (3,), np.float32)
        self.observation_spaces = {a: box for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(2) for a in self.possible_agents}
        self.state_space = box
        """The global state's space: the one-hot state, as each agent observes it."""
        self._state = 0

    def state(self) -> npt.NDArray[np.float32]:
        """The global state: the one-hot of state 1, 2A or 2B."""
        state: npt.NDArray[np.float32] = np.eye(3, dtype=np.float32)[self._state]
        return state

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start in state 1 (nothing random: ``seed`` is ignored)."""
        self._state = 0
        self.agents = list(self.possible_agents)
        return {a: self.state() for a in self.agents}, {a: {} for a in self.agents}

    def step(self, action_dict: Mapping[AgentID, Any]) -> MultiAgentStep:
        """State 1: ``agent_0``'s action picks 2A or 2B (reward 0); state 2A or 2B: the
        payoff, split evenly between the agents, and the episode ends."""
        self._check_action_keys(action_dict)
        actions = [int(action_dict[a]) for a in self.possible_agents]
        if any(a not in (0, 1) for a in actions):
            raise ConfigError(f"TwoStepGame.step: actions {actions} must be 0 (A) or 1 (B)")
        if self._state == 0:
            self._state = 1 + actions[0]
            payoff, done = 0.0, False
        else:
            first, second = actions
            payoff = self.PAYOFF_2A if self._state == 1 else self.PAYOFF_2B[first][second]
            done = True
        share = payoff / len(self.possible_agents)
        obs = {a: self.state() for a in self.possible_agents}
        if done:
            self.agents = []
        return MultiAgentStep(
            obs,
            dict.fromkeys(self.possible_agents, share),
            {**dict.fromkeys(obs, done), ALL_AGENTS: done},
            {**dict.fromkeys(obs, False), ALL_AGENTS: False},
            {a: {} for a in obs},
        )


MULTI_AGENT_ENVS: dict[str, Callable[..., MultiAgentEnv]] = {
    "multi_cartpole": MultiAgentCartPole,
    "two_team_grid": TwoTeamGrid,
    "two_step_game": TwoStepGame,
}
"""Multi-agent envs by the name the CLI and configs use."""


def make_multi_agent_env(name_or_creator: str | Callable[..., Any], **kwargs: Any) -> MultiAgentEnv:
    """Build a multi-agent env from a name in `MULTI_AGENT_ENVS` or a creator, with ``kwargs``.

    A creator may return a `MultiAgentEnv` or a PettingZoo env (adapted by `from_pettingzoo`).
    Raises `ConfigError` for an unknown name, suggesting the closest registered ones.

    Example:
        >>> make_multi_agent_env("multi_cartpole", num_agents=3).possible_agents
        ['agent_0', 'agent_1', 'agent_2']
    """
    if isinstance(name_or_creator, str):
        creator = MULTI_AGENT_ENVS.get(name_or_creator)
        if creator is None:
            close = difflib.get_close_matches(name_or_creator, list(MULTI_AGENT_ENVS), n=3)
            hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
            raise ConfigError(
                f"make_multi_agent_env: unknown multi-agent env {name_or_creator!r}; {hint}"
                f"registered names are {sorted(MULTI_AGENT_ENVS)} (or pass a creator function)"
            )
        return creator(**kwargs)
    if not callable(name_or_creator):
        raise ConfigError(
            f"make_multi_agent_env: {name_or_creator!r} must be a registered name or a callable "
            "returning a MultiAgentEnv or a PettingZoo env"
        )
    env = name_or_creator(**kwargs)
    return env if isinstance(env, MultiAgentEnv) else from_pettingzoo(env)

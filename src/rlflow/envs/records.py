"""Records of env steps and episodes, and the one rule that turns policy actions into env
actions; shared by `rlflow.envs.vector.VectorEnv`, the samplers and evaluation (and re-exported
by `rlflow.envs.vector`)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

__all__ = [
    "LOGGED_ACTION",
    "NO_LOGGED_ACTIONS",
    "AgentReturn",
    "EpisodeStat",
    "GameScores",
    "VectorStep",
    "env_action",
    "env_actions",
]

Array = npt.NDArray[Any]

LOGGED_ACTION = "logged_action"
"""The ``info`` key of an env whose client took the action for the observation it returns
itself (`rlflow.serve`, local inference): the sampler records that action in place of its
policy's, with its log-likelihood under the policy's distribution."""

NO_LOGGED_ACTIONS: Mapping[int, Any] = MappingProxyType({})
"""No sub-env's client took its action itself."""


class AgentReturn(NamedTuple):
    """One agent's part of a finished multi-agent episode."""

    agent_id: str
    """The agent."""
    policy_id: str
    """The policy that acted for it."""
    return_: float
    """Undiscounted sum of the agent's rewards."""


class EpisodeStat(NamedTuple):
    """Return and length of one finished episode."""

    return_: float
    """Undiscounted sum of the episode's rewards (over all agents in a multi-agent env)."""
    length: int
    """Number of (env) steps in the episode."""
    agent_returns: tuple[AgentReturn, ...] = ()
    """Multi-agent episodes: each agent's return and policy; empty for single-agent ones."""


class GameScores:
    """The running score and length of each sub-env's current game, for engines whose games
    outlast the learner's episodes (Atari with episodic life: a lost life ends an episode, the
    game goes on): the episode statistics count whole games.

    Args:
        num_envs: sub-envs of the engine.
    """

    def __init__(self, num_envs: int) -> None:
        """All games at zero."""
        self.returns = np.zeros(num_envs, dtype=np.float64)
        """Each sub-env's game score so far (the game's own rewards, unclipped)."""
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        """Each sub-env's env steps in its game so far."""

    def clear(self) -> None:
        """Drop every game in progress (the engine reset them all)."""
        self.returns[:] = 0.0
        self.lengths[:] = 0

    def add(self, rewards: npt.NDArray[np.floating[Any]], live: npt.NDArray[np.bool_]) -> None:
        """Add one step's ``rewards`` to the games of the ``live`` rows (a boolean mask)."""
        self.returns[live] += rewards[live]
        self.lengths[live] += 1

    def finish(self, rows: list[int]) -> list[EpisodeStat]:
        """The games of ``rows`` as finished episodes; their rows start new games at zero."""
        stats = [EpisodeStat(float(self.returns[i]), int(self.lengths[i])) for i in rows]
        self.returns[rows] = 0.0
        self.lengths[rows] = 0
        return stats


class VectorStep(NamedTuple):
    """Result of `VectorEnv.step`, one row per sub-env."""

    next_obs: Array
    """Observation to act on next: the new episode's first one where an episode ended."""
    rewards: npt.NDArray[np.float32]
    """Reward of the step, shape ``(num_envs,)``."""
    terminateds: npt.NDArray[np.bool_]
    """True where the episode reached a terminal state."""
    truncateds: npt.NDArray[np.bool_]
    """True where the episode was cut off (e.g. a time limit)."""
    final_obs: Array
    """The true observation after the step: the episode's last one where it ended, else equal
    to ``next_obs``. Store it as `NEXT_OBS` for bootstrapping."""
    logged_actions: Mapping[int, Any] = NO_LOGGED_ACTIONS
    """``{sub-env: action}`` its client took itself for its ``next_obs`` (`LOGGED_ACTION`)."""


def env_action(space: Any, action: Any) -> Any:
    """One policy action as its env takes it: an ``int`` for Discrete, clipped to the bounds
    (in the space's dtype) for Box, the space's dtype for MultiDiscrete and MultiBinary, else
    unchanged. The one rule of every sampler and of evaluation (see `env_actions`).

    >>> env_action(spaces.Box(-1.0, 1.0, (2,)), np.array([0.5, 3.0])).tolist()
    [0.5, 1.0]
    """
    if isinstance(space, spaces.Discrete):
        return int(action)
    if isinstance(space, spaces.Box):
        return np.clip(action, space.low, space.high).astype(space.dtype, copy=False)
    if isinstance(space, spaces.MultiDiscrete | spaces.MultiBinary):
        return np.asarray(action).astype(space.dtype, copy=False)
    return action


def env_actions(space: Any, actions: Array) -> Any:
    """A batch of policy actions (one row per env) as the envs take them: `env_action` of each
    row, done once for the batch (Discrete: a list of ints)."""
    if isinstance(space, spaces.Discrete):
        return actions.tolist()
    return env_action(space, actions)

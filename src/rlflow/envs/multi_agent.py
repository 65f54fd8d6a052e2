"""A dict-based multi-agent env API (`MultiAgentEnv`) and an adapter from PettingZoo.

The API is RLlib's: every value is a dict keyed by agent id.

- ``reset(seed=..., options=...) -> (obs, infos)``: ``obs`` holds the agents that act first.
- ``step(action_dict) -> MultiAgentStep(obs, rewards, terminateds, truncateds, infos)``:
  ``action_dict`` has one action for each agent in `MultiAgentEnv.agents` (the agents of the
  last ``obs`` that are still in the episode). ``obs`` holds the agents that act next and
  those that left in this step (their last observation); each agent in ``obs`` also has an
  entry in ``rewards``, ``terminateds``, ``truncateds`` and ``infos``.
- An agent whose ``terminateds`` or ``truncateds`` entry is True has left: it gets no further
  observation in this episode. Agents may also join mid-episode, by appearing in ``obs``.
- ``terminateds`` and ``truncateds`` also hold `ALL_AGENTS` (``"__all__"``): True in
  ``terminateds`` when the episode is over and no agent of it was truncated, True in
  ``truncateds`` when it is over and some agent was cut off; then call ``reset``.

Reference: the PettingZoo Parallel API (Terry et al., "PettingZoo: Gym for Multi-Agent
Reinforcement Learning", NeurIPS 2021), which `from_pettingzoo` adapts.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

import gymnasium as gym

from rlflow.errors import ConfigError

logger = logging.getLogger(__name__)

AgentID = str
"""An agent's id; unique within an env."""
MultiAgentDict = dict[AgentID, Any]
"""A per-agent dict (observations, rewards, flags, infos or actions)."""
ALL_AGENTS = "__all__"
"""Key in ``terminateds`` / ``truncateds`` that ends the episode for every agent."""


class MultiAgentStep(NamedTuple):
    """What `MultiAgentEnv.step` returns (unpacks like Gymnasium's 5-tuple)."""

    obs: MultiAgentDict
    """Observations of the agents that act next and of those that just left."""
    rewards: dict[AgentID, float]
    """Reward of each agent in ``obs`` for this step."""
    terminateds: dict[AgentID, bool]
    """Per agent: reached a terminal state; plus `ALL_AGENTS`."""
    truncateds: dict[AgentID, bool]
    """Per agent: cut off (e.g. a time limit); plus `ALL_AGENTS`."""
    infos: MultiAgentDict
    """Per-agent info dicts."""


class MultiAgentEnv(abc.ABC):
    """Base class of dict-based multi-agent environments (see the module docstring).

    Subclasses set the four attributes below in ``__init__`` and keep `agents` up to date.
    """

    possible_agents: list[AgentID]
    """Every agent that may ever appear, in a fixed order."""
    agents: list[AgentID]
    """Agents currently in the episode: those expected in the next ``action_dict``."""
    observation_spaces: dict[AgentID, gym.Space[Any]]
    """Observation space of each possible agent."""
    action_spaces: dict[AgentID, gym.Space[Any]]
    """Action space of each possible agent."""

    @abc.abstractmethod
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start an episode; return the first observations and infos of the acting agents."""

    @abc.abstractmethod
    def step(self, action_dict: Mapping[AgentID, Any]) -> MultiAgentStep:
        """Apply one action per active agent; see the module docstring for the result."""

    def close(self) -> None:  # noqa: B027  (optional hook, a no-op by default)
        """Release resources; the default does nothing."""

    def _check_action_keys(self, action_dict: Mapping[AgentID, Any]) -> None:
        """Raise `ConfigError` unless ``action_dict`` has exactly the active agents."""
        given, active = set(action_dict), set(self.agents)
        if given != active:
            raise ConfigError(
                f"{type(self).__name__}.step: action_dict has agents {sorted(given)} but the "
                f"active agents are {sorted(active)}; give one action per active agent (agents "
                "that left get none; after '__all__' call reset())"
            )


class PettingZooEnv(MultiAgentEnv):
    """A PettingZoo ``ParallelEnv`` seen as a `MultiAgentEnv` (build it with `from_pettingzoo`).

    Observations, rewards and infos pass through unchanged (rewards as float); flags become
    bool and gain `ALL_AGENTS`, True once PettingZoo's ``env.agents`` is empty.
    """

    def __init__(self, env: Any) -> None:
        """Wrap the PettingZoo parallel env ``env``."""
        self.env = env
        """The wrapped PettingZoo ``ParallelEnv``."""
        self.possible_agents = list(env.possible_agents)
        self.agents = []
        self.observation_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}
        self._any_truncated = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset the PettingZoo env with ``seed`` and ``options``."""
        obs, infos = self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        self._any_truncated = False
        return dict(obs), dict(infos)

    def step(self, action_dict: Mapping[AgentID, Any]) -> MultiAgentStep:
        """Step the PettingZoo env with one action per active agent."""
        self._check_action_keys(action_dict)
        obs, rewards, terms, truncs, infos = self.env.step(dict(action_dict))
        self.agents = list(self.env.agents)
        terminateds = {agent: bool(flag) for agent, flag in terms.items()}
        truncateds = {agent: bool(flag) for agent, flag in truncs.items()}
        self._any_truncated = self._any_truncated or any(truncateds.values())
        over = not self.agents
        terminateds[ALL_AGENTS] = over and not self._any_truncated
        truncateds[ALL_AGENTS] = over and self._any_truncated
        return MultiAgentStep(
            dict(obs),
            {agent: float(r) for agent, r in rewards.items()},
            terminateds,
            truncateds,
            dict(infos),
        )

    def close(self) -> None:
        """Close the PettingZoo env."""
        self.env.close()


def from_pettingzoo(env: Any) -> PettingZooEnv:
    """Adapt a PettingZoo env: a ``ParallelEnv`` as it is, an ``AECEnv`` via ``aec_to_parallel``.

    AEC envs must be parallelizable (``metadata["is_parallelizable"]``: every agent acts once
    per cycle); turn-based games such as chess or tic-tac-toe are not, and raise `ConfigError`.

    Example:
        >>> import pettingzoo
        >>> env = from_pettingzoo(pettingzoo.make("aec", "classic/rps-v2"))
        >>> sorted(env.reset(seed=0)[0])
        ['player_0', 'player_1']
    """
    try:
        from pettingzoo.utils.conversions import aec_to_parallel
        from pettingzoo.utils.env import AECEnv, ParallelEnv
    except ImportError as err:
        raise ConfigError(
            f"from_pettingzoo: pettingzoo could not be imported ({err}); install the "
            'multiagent extra: `pip install "rl-flow[multiagent]"`'
        ) from err
    if isinstance(env, AECEnv):
        if not env.metadata.get("is_parallelizable", False):
            raise ConfigError(
                f"from_pettingzoo: AEC env {env} is not parallelizable (metadata "
                "'is_parallelizable' is not True), so aec_to_parallel cannot convert it; "
                "turn-based games need an AEC-aware rollout, which rlflow does not have"
            )
        env = aec_to_parallel(env)
    if not isinstance(env, ParallelEnv):
        raise ConfigError(
            f"from_pettingzoo: {env!r} ({type(env).__name__}) is neither a PettingZoo "
            "ParallelEnv nor an AECEnv; multi-agent envs must subclass "
            "rlflow.envs.multi_agent.MultiAgentEnv or come from PettingZoo"
        )
    return PettingZooEnv(env)

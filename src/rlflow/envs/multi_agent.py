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


class _PettingZooAdapter(MultiAgentEnv):
    """What both PettingZoo adapters share: the wrapped env, its agents and their spaces."""

    def __init__(self, env: Any) -> None:
        """Wrap the PettingZoo env ``env``."""
        self.env = env
        """The wrapped PettingZoo env."""
        self.possible_agents = list(env.possible_agents)
        self.agents = []
        self.observation_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}
        self._any_truncated = False

    def close(self) -> None:
        """Close the PettingZoo env."""
        self.env.close()


class PettingZooEnv(_PettingZooAdapter):
    """A PettingZoo ``ParallelEnv`` seen as a `MultiAgentEnv` (build it with `from_pettingzoo`).

    Observations, rewards and infos pass through unchanged (rewards as float); flags become
    bool and gain `ALL_AGENTS`, True once PettingZoo's ``env.agents`` is empty.
    """

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


class PettingZooAECEnv(_PettingZooAdapter):
    """A turn-based PettingZoo ``AECEnv`` seen as a `MultiAgentEnv` (build it with
    `from_pettingzoo`): chess, tic-tac-toe, connect four, poker...

    Each step is one agent's turn: ``obs`` (and `agents`) hold only the agent whose turn comes
    next, so only it acts. ``rewards`` hold every agent's reward from that turn (PettingZoo's
    ``env.rewards``), so an agent's reward for its action is what accrues until its next turn
    (the sampler keeps the agent's row open until then, `rlflow.workers.multi_agent_sampler`).
    An agent whose game is over (terminated or truncated) leaves in that step with its final
    observation, whether or not it was its turn; the adapter takes PettingZoo's "dead steps"
    (``step(None)``) for it. `ALL_AGENTS` is True once every agent left.
    """

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset the PettingZoo env; the first observation is the first mover's."""
        self.env.reset(seed=seed, options=options)
        self._any_truncated = False
        first = self.env.agent_selection
        self.agents = [first]
        return {first: self.env.observe(first)}, {first: dict(self.env.infos.get(first, {}))}

    def step(self, action_dict: Mapping[AgentID, Any]) -> MultiAgentStep:
        """Play the turn of the agent whose turn it is (its action in ``action_dict``)."""
        self._check_action_keys(action_dict)
        env = self.env
        env.step(action_dict[env.agent_selection])
        rewards = {agent: float(r) for agent, r in env.rewards.items()}
        obs: MultiAgentDict = {}
        terminateds: dict[AgentID, bool] = {}
        truncateds: dict[AgentID, bool] = {}
        infos: MultiAgentDict = {}
        for agent in list(env.agents):  # those whose game is over leave, with a last look
            terminated, truncated = bool(env.terminations[agent]), bool(env.truncations[agent])
            if terminated or truncated:
                obs[agent] = env.observe(agent)
                terminateds[agent] = terminated
                truncateds[agent] = truncated and not terminated
                infos[agent] = dict(env.infos.get(agent, {}))
        self._any_truncated = self._any_truncated or any(truncateds.values())
        while env.agents and (
            env.terminations[env.agent_selection] or env.truncations[env.agent_selection]
        ):
            env.step(None)  # PettingZoo's dead step: the agent is removed
        self.agents = [env.agent_selection] if env.agents else []
        for agent in self.agents:  # the next mover
            obs[agent] = env.observe(agent)
            terminateds[agent] = truncateds[agent] = False
            infos[agent] = dict(env.infos.get(agent, {}))
        over = not self.agents
        terminateds[ALL_AGENTS] = over and not self._any_truncated
        truncateds[ALL_AGENTS] = over and self._any_truncated
        return MultiAgentStep(obs, rewards, terminateds, truncateds, infos)


def from_pettingzoo(env: Any) -> PettingZooEnv | PettingZooAECEnv:
    """Adapt a PettingZoo env: a ``ParallelEnv`` as it is; an ``AECEnv`` via
    ``aec_to_parallel`` when it is parallelizable (``metadata["is_parallelizable"]``: every
    agent acts once per cycle), else turn by turn (`PettingZooAECEnv`: chess, tic-tac-toe...).

    Example:
        >>> import pettingzoo
        >>> env = from_pettingzoo(pettingzoo.make("aec", "classic/rps-v2"))
        >>> sorted(env.reset(seed=0)[0])
        ['player_0', 'player_1']
        >>> from pettingzoo.classic import tictactoe_v3
        >>> sorted(from_pettingzoo(tictactoe_v3.env()).reset(seed=0)[0])
        ['player_1']
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
            return PettingZooAECEnv(env)
        env = aec_to_parallel(env)
    if not isinstance(env, ParallelEnv):
        raise ConfigError(
            f"from_pettingzoo: {env!r} ({type(env).__name__}) is neither a PettingZoo "
            "ParallelEnv nor an AECEnv; multi-agent envs must subclass "
            "rlflow.envs.multi_agent.MultiAgentEnv or come from PettingZoo"
        )
    return PettingZooEnv(env)

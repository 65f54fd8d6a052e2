"""Agent groups: a team of agents seen as one agent whose rows travel together (RLlib's
``with_agent_groups`` idea), for centralized training with decentralized execution.

A run names its teams with ``groups`` (``{"team": ["agent_0", "agent_1", "agent_2"]}``, a
field of `rlflow.config.rollouts.RolloutConfig`); the env creator then wraps the multi-agent
env in :class:`GroupAgents`, whose agents are the group ids (and every agent in no group, as
it is). Per step, a group

- observes a :class:`TeamBox` vector: each member's flat observation, zero-padded to the
  longest member's, followed by the member's action mask (when the members' observations carry
  one: PettingZoo's ``{"observation", "action_mask"}``, flattened by `rlflow.envs.flatten`),
  then the **global state**: the env's ``state()`` (PettingZoo parallel envs that have one,
  with their ``state_space``) or, when there is none, the members' observations side by side;
- acts with one action per member: a ``MultiDiscrete`` of the members' ``Discrete`` action
  spaces, or a ``Box`` of their ``Box`` spaces side by side (members' actions all of one kind);
- is rewarded with the **team reward**: the sum of its members' rewards in the step (for a
  cooperative env that gives each agent the shared reward, divide by the team size or mind
  that returns are summed over members, as EPyMARL reports them);
- leaves when every member has left. A member that left before the others observes zeros and
  its actions are ignored.

Groups need an env whose agents act together (a PettingZoo parallel env or a
`rlflow.envs.multi_agent.MultiAgentEnv` whose agents all act each step, every member present at
``reset``); turn-based games are refused. Team algorithms (QMIX, VDN, MADDPG, MAPPO) read the
layout from the space (:meth:`TeamBox.split`); any other algorithm sees the team as one agent
with a joint action (a centralized controller).

>>> from rlflow.envs.ma_envs import make_multi_agent_env
>>> inner = make_multi_agent_env("multi_cartpole", num_agents=2)
>>> env = GroupAgents(inner, {"team": ["agent_0", "agent_1"]})
>>> env.possible_agents
['team']
>>> space = env.observation_spaces["team"]
>>> space.num_agents, space.agent_obs_size, space.state_size
(2, 4, 8)
>>> obs, _ = env.reset(seed=0)
>>> parts = space.split(obs["team"])
>>> parts.agents.shape, parts.state.shape
((2, 4), (8,))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.config.rollouts import check_groups
from rlflow.envs.flatten import action_mask_size
from rlflow.envs.multi_agent import (
    ALL_AGENTS,
    AgentID,
    MultiAgentDict,
    MultiAgentEnv,
    MultiAgentStep,
)
from rlflow.errors import ConfigError

Array = npt.NDArray[Any]


class TeamObs(NamedTuple):
    """A team observation (or a batch of them) split by :meth:`TeamBox.split`; numpy arrays
    or torch tensors, as given."""

    agents: Any
    """Members' observations, ``[..., num_agents, agent_obs_size]`` (zero-padded)."""
    masks: Any
    """Members' action masks, ``[..., num_agents, agent_mask_size]`` (1.0: legal), or None."""
    state: Any
    """The global state, ``[..., state_size]``."""


class TeamBox(spaces.Box):
    """The flat float32 observation space of a group (:class:`GroupAgents`): per member, its
    observation (``agent_obs_size`` values, zero-padded) and its action mask
    (``agent_mask_size`` values, 0 when none), then the global state (``state_size``)."""

    def __init__(
        self,
        low: Array,
        high: Array,
        *,
        agent_ids: list[AgentID],
        agent_obs_size: int,
        agent_mask_size: int,
        state_size: int,
        agent_action_sizes: list[int],
        agent_obs_sizes: list[int] | None = None,
    ) -> None:
        """A ``Box`` of shape ``(len(low),)`` with the layout given by the keywords;
        ``agent_obs_sizes`` None: read from the bounds (trailing values bounded to ``[0, 0]``
        are a member's padding)."""
        super().__init__(np.asarray(low), np.asarray(high), (len(low),), np.float32)
        self.agent_ids = list(agent_ids)
        """The members, in the order of the layout (and of the joint action)."""
        self.agent_obs_size = int(agent_obs_size)
        """Values of one member's (padded) observation."""
        self.agent_mask_size = int(agent_mask_size)
        """Values of one member's action mask (0: the members' observations carry none)."""
        self.state_size = int(state_size)
        """Values of the global state."""
        self.agent_action_sizes = [int(n) for n in agent_action_sizes]
        """Per member: its number of actions (``Discrete``) or action values (``Box``)."""
        self.agent_obs_sizes = (
            [int(n) for n in agent_obs_sizes]
            if agent_obs_sizes is not None
            else self._obs_sizes_from_bounds()
        )
        """Per member: the size of its own observation (without the padding)."""

    def _obs_sizes_from_bounds(self) -> list[int]:
        per = self.agent_obs_size + self.agent_mask_size
        sizes = []
        for i in range(len(self.agent_ids)):
            low = self.low[i * per : i * per + self.agent_obs_size]
            high = self.high[i * per : i * per + self.agent_obs_size]
            size = self.agent_obs_size
            while size > 1 and low[size - 1] == 0.0 and high[size - 1] == 0.0:
                size -= 1
            sizes.append(size)
        return sizes

    @property
    def num_agents(self) -> int:
        """How many members the team has."""
        return len(self.agent_ids)

    def split(self, obs: Any) -> TeamObs:
        """Split team observations ``[..., shape[0]]`` (numpy or torch) into their parts."""
        per = self.agent_obs_size + self.agent_mask_size
        lead = tuple(obs.shape[:-1])
        members = obs[..., : per * self.num_agents].reshape(*lead, self.num_agents, per)
        masks = members[..., self.agent_obs_size :] if self.agent_mask_size else None
        return TeamObs(
            members[..., : self.agent_obs_size], masks, obs[..., per * self.num_agents :]
        )

    def _key(self) -> tuple[Any, ...]:
        return (
            tuple(self.agent_ids),
            self.agent_obs_size,
            self.agent_mask_size,
            self.state_size,
            tuple(self.agent_action_sizes),
            tuple(self.agent_obs_sizes),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TeamBox) and other._key() == self._key() and super().__eq__(other)

    def __hash__(self) -> int:
        return hash((self.shape, self._key()))

    def __repr__(self) -> str:
        return (
            f"TeamBox({self.shape}, agents={self.agent_ids}, agent_obs_size="
            f"{self.agent_obs_size}, agent_mask_size={self.agent_mask_size}, "
            f"state_size={self.state_size})"
        )


def team_space(space: gym.Space[Any]) -> TeamBox | None:
    """``space`` when it is a group's observation space, else None."""
    return space if isinstance(space, TeamBox) else None


def _state_source(env: Any) -> Any:
    """The innermost-or-first object of ``env``'s wrapper chain (``.env`` links) that has a
    callable ``state`` and a ``state_space`` (PettingZoo's global state), or None."""
    seen = 0
    while env is not None and seen < 16:
        if callable(getattr(env, "state", None)) and isinstance(
            getattr(env, "state_space", None), spaces.Box
        ):
            return env
        env = getattr(env, "env", None)
        seen += 1
    return None


def _is_turn_based(env: Any) -> bool:
    from rlflow.envs.multi_agent import PettingZooAECEnv

    seen = 0
    while env is not None and seen < 16:
        if isinstance(env, PettingZooAECEnv):
            return True
        env = getattr(env, "env", None)
        seen += 1
    return False


class GroupAgents(MultiAgentEnv):
    """A `MultiAgentEnv` whose groups of agents act as one agent each (the module docstring)."""

    def __init__(self, env: MultiAgentEnv, groups: Mapping[str, list[AgentID]]) -> None:
        """Wrap ``env`` (observations already flat: `rlflow.envs.flatten`) with ``groups``;
        `ConfigError` for a member the env does not have, a turn-based env, members whose
        observations are not flat vectors or whose actions are of different kinds."""
        self.env = env
        """The wrapped env."""
        self.groups = check_groups(groups)
        """Group id -> its members."""
        if _is_turn_based(env):
            raise ConfigError(
                "groups: the env is turn-based (one agent acts per step); groups need agents "
                "that act together (a PettingZoo parallel env)"
            )
        known = list(env.possible_agents)
        for name, members in self.groups.items():
            missing = [a for a in members if a not in known]
            if missing:
                raise ConfigError(
                    f"groups.{name}: agents {missing} are not agents of the env; its agents "
                    f"are {known}"
                )
            if name in known and name not in members:
                raise ConfigError(
                    f"groups: group id {name!r} is also the id of an agent in no group; "
                    "rename the group"
                )
        self._group_of = {a: g for g, members in self.groups.items() for a in members}
        self._state_env = _state_source(env)
        self.possible_agents = [
            *self.groups,
            *(a for a in known if a not in self._group_of),
        ]
        self.observation_spaces = {
            a: env.observation_spaces[a] for a in known if a not in self._group_of
        }
        self.action_spaces = {a: env.action_spaces[a] for a in known if a not in self._group_of}
        for name, members in self.groups.items():
            self.observation_spaces[name], self.action_spaces[name] = self._team_spaces(
                name, members
            )
        self.agents: list[AgentID] = []
        self._left: dict[str, set[AgentID]] = {}
        self._last: dict[AgentID, Array] = {}

    # ------------------------------------------------------------------------ spaces
    def _team_spaces(self, name: str, members: list[AgentID]) -> tuple[TeamBox, gym.Space[Any]]:
        obs_spaces: list[spaces.Box] = []
        for agent in members:
            space = self.env.observation_spaces[agent]
            if isinstance(space, spaces.Box) and len(space.shape) == 1:
                obs_spaces.append(space)
            else:
                raise ConfigError(
                    f"groups.{name}: agent {agent!r} observes {space}; team members need flat "
                    "vector observations (Box of one dimension, or a structured space that "
                    "rlflow flattens)"
                )
        masks = {action_mask_size(s) for s in obs_spaces}
        if len(masks) > 1:
            raise ConfigError(
                f"groups.{name}: some members' observations carry an action mask and others "
                "do not, or the masks differ in size; a team's members need the same kind"
            )
        mask = masks.pop()
        sizes = [s.shape[0] - mask for s in obs_spaces]
        width = max(sizes)
        low: list[Array] = []
        high: list[Array] = []
        for space, size in zip(obs_spaces, sizes, strict=True):
            pad = np.zeros(width - size, np.float32)
            low += [space.low[:size].astype(np.float32), pad, np.zeros(mask, np.float32)]
            high += [space.high[:size].astype(np.float32), pad, np.ones(mask, np.float32)]
        if self._state_env is not None:
            state_space = self._state_env.state_space
            low.append(np.asarray(state_space.low, np.float32).reshape(-1))
            high.append(np.asarray(state_space.high, np.float32).reshape(-1))
            state_size = int(np.prod(state_space.shape))
        else:
            low += [np.concatenate([s.low[:n] for s, n in zip(obs_spaces, sizes, strict=True)])]
            high += [np.concatenate([s.high[:n] for s, n in zip(obs_spaces, sizes, strict=True)])]
            state_size = sum(sizes)
        act_spaces = [self.env.action_spaces[a] for a in members]
        action: gym.Space[Any]
        if all(isinstance(s, spaces.Discrete) for s in act_spaces):
            action_sizes = [int(s.n) for s in act_spaces]  # type: ignore[attr-defined]
            starts = {int(s.start) for s in act_spaces}  # type: ignore[attr-defined]
            if starts != {0}:
                raise ConfigError(f"groups.{name}: members' Discrete actions must start at 0")
            action = spaces.MultiDiscrete(action_sizes)
        elif all(isinstance(s, spaces.Box) and len(s.shape) == 1 for s in act_spaces):
            action_sizes = [int(s.shape[0]) for s in act_spaces]  # type: ignore[index]
            action = spaces.Box(
                np.concatenate([s.low for s in act_spaces]).astype(np.float32),  # type: ignore[attr-defined]
                np.concatenate([s.high for s in act_spaces]).astype(np.float32),  # type: ignore[attr-defined]
                dtype=np.float32,
            )
        else:
            raise ConfigError(
                f"groups.{name}: members act in {act_spaces}; a team's members need all "
                "Discrete or all one-dimensional Box action spaces"
            )
        team = TeamBox(
            np.concatenate(low),
            np.concatenate(high),
            agent_ids=members,
            agent_obs_size=width,
            agent_mask_size=mask,
            state_size=state_size,
            agent_action_sizes=action_sizes,
            agent_obs_sizes=sizes,
        )
        return team, action

    # ------------------------------------------------------------------------ stepping
    def _team_obs(self, name: str, obs: MultiAgentDict) -> Array:
        space = self.observation_spaces[name]
        assert isinstance(space, TeamBox)
        width, mask = space.agent_obs_size, space.agent_mask_size
        parts: list[Array] = []
        own: list[Array] = []
        for agent in self.groups[name]:
            if agent in obs:
                self._last[agent] = np.asarray(obs[agent], np.float32).reshape(-1)
            flat = self._last.get(agent)
            if flat is None or (agent in self._left[name] and agent not in obs):
                flat = np.zeros(width + mask, np.float32)
                if mask:
                    flat[width:] = 1.0  # its (ignored) action may be anything
            size = flat.shape[0] - mask
            body = np.concatenate([flat[:size], np.zeros(width - size, np.float32)])
            parts += [body, flat[size:]]
            own.append(flat[:size])
        if self._state_env is not None:
            parts.append(np.asarray(self._state_env.state(), np.float32).reshape(-1))
        else:
            parts.append(np.concatenate(own))
        return np.concatenate(parts)

    def _pack(self, obs: MultiAgentDict, present: set[str]) -> MultiAgentDict:
        packed = {a: o for a, o in obs.items() if a not in self._group_of}
        for name in self.groups:
            if name in present:
                packed[name] = self._team_obs(name, obs)
        return packed

    def _team_infos(self, infos: MultiAgentDict, present: set[str]) -> MultiAgentDict:
        out = {a: i for a, i in infos.items() if a not in self._group_of}
        for name in present:
            out[name] = {a: infos[a] for a in self.groups[name] if a in infos}
        return out

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset the env; every member of every group must be among the first observations."""
        obs, infos = self.env.reset(seed=seed, options=options)
        self._left = {name: set() for name in self.groups}
        self._last = {}
        for name, members in self.groups.items():
            absent = [a for a in members if a not in obs]
            if absent:
                raise ConfigError(
                    f"groups.{name}: agents {absent} have no observation at reset; a team's "
                    "members must all be in the episode from its start (a fixed agent set)"
                )
        present = set(self.groups)
        self.agents = [a for a in self.possible_agents if a in present or a in obs]
        return self._pack(obs, present), self._team_infos(infos, present)

    def step(self, action_dict: Mapping[AgentID, Any]) -> MultiAgentStep:
        """Step with one action per active group (a joint action, split to its members still
        in the episode) or ungrouped agent."""
        self._check_action_keys(action_dict)
        actions: dict[AgentID, Any] = {}
        active = set(self.env.agents)
        for agent, action in action_dict.items():
            if agent not in self.groups:
                actions[agent] = action
                continue
            space = self.observation_spaces[agent]
            assert isinstance(space, TeamBox)
            joint = np.asarray(action)
            offset = 0
            for member, size in zip(self.groups[agent], space.agent_action_sizes, strict=True):
                if isinstance(self.action_spaces[agent], spaces.MultiDiscrete):
                    value: Any = int(joint[offset])
                    offset += 1
                else:
                    value = joint[offset : offset + size]
                    offset += size
                if member in active:
                    actions[member] = value
        step = self.env.step(actions)
        present: set[str] = set()
        rewards = {a: r for a, r in step.rewards.items() if a not in self._group_of}
        terms = {a: f for a, f in step.terminateds.items() if a not in self._group_of}
        truncs = {a: f for a, f in step.truncateds.items() if a not in self._group_of}
        for name, members in self.groups.items():
            if name not in self.agents:
                continue
            present.add(name)
            rewards[name] = float(sum(step.rewards.get(a, 0.0) for a in members))
            for agent in members:
                if step.terminateds.get(agent) or step.truncateds.get(agent):
                    self._left[name].add(agent)
            over = len(self._left[name]) == len(members) or bool(
                step.terminateds.get(ALL_AGENTS) or step.truncateds.get(ALL_AGENTS)
            )
            truncated = over and any(step.truncateds.get(a) for a in members)
            truncated = truncated or (over and bool(step.truncateds.get(ALL_AGENTS)))
            terms[name] = over and not truncated
            truncs[name] = truncated
        obs = self._pack(step.obs, present)
        infos = self._team_infos(step.infos, present)
        inner = set(self.env.agents)
        self.agents = [
            a
            for a in self.possible_agents
            if (a in self.groups and a in present and not (terms[a] or truncs[a]))
            or (a not in self.groups and a in inner)
        ]
        return MultiAgentStep(obs, rewards, terms, truncs, infos)

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()


def group_agents(creator: Any, groups: Mapping[str, list[AgentID]]) -> GroupAgents:
    """``creator()`` (a multi-agent env, PettingZoo ones adapted) wrapped in
    :class:`GroupAgents` with ``groups``; `ConfigError` for a single-agent env."""
    from rlflow.envs.multi_agent import from_pettingzoo

    env = creator()
    if isinstance(env, gym.Env) or getattr(env, "possible_agents", None) is None:
        raise ConfigError(
            f"groups: the env is single-agent ({type(env).__name__}); groups name agents of a "
            "multi-agent env (a PettingZoo env or an rlflow MultiAgentEnv)"
        )
    return GroupAgents(env if isinstance(env, MultiAgentEnv) else from_pettingzoo(env), groups)

"""Flat observations from Dict, Tuple, MultiDiscrete and MultiBinary spaces (RLlib's preprocessors).

rlflow's models take a ``Box`` (or a ``Discrete``, one-hot encoded inside the model). So that
every algorithm takes structured observations too, the env creator
(`rlflow.envs.creator.config_env_creator`) wraps a single-agent env whose observation space is a
``Dict``, ``Tuple``, ``MultiDiscrete`` or ``MultiBinary`` in :class:`FlattenObservations`: each
observation becomes one float32 vector, its parts side by side in the space's order (a
``Dict``'s keys in the order of ``space.spaces``: gymnasium sorts the keys of a plain dict).
Per part:

- ``Box``: its values in C order, with its bounds;
- ``Discrete(n)``: one-hot, ``n`` values;
- ``MultiDiscrete(nvec)``: each component one-hot, ``sum(nvec)`` values;
- ``MultiBinary(n)``: its bits as 0.0/1.0;
- ``Dict`` and ``Tuple``: their parts, flattened the same way (nesting to any depth).

Action masks (PettingZoo's convention, also for Gymnasium envs): a ``Dict`` space with an
``"action_mask"`` key (`ACTION_MASK`) is laid out with its other keys first and the mask last,
as 0.0/1.0 values, and its flat space is an :class:`ActionMaskBox`, which says how many of the
last values are the mask. A policy given such a space acts only on legal actions (the mask
gives its action-distribution inputs, `rlflow.models.masking`) and, unless
``model.use_action_mask_as_input``, its network never sees the mask.

A space with a part of any other kind (``Text``, ``Graph``, ``Sequence``, ``OneOf``) is left as
it is, and the algorithm's policy refuses it, naming the part (:func:`unflattenable_part`).
A multi-agent env (a `rlflow.envs.multi_agent.MultiAgentEnv`, or a PettingZoo env, adapted
first) whose agents have such spaces is wrapped in :class:`FlattenMultiAgentObservations`,
which flattens each agent's observations the same way. Observations given to a trainer's
policy by hand (`Trainer.compute_single_action`) and to an ONNX graph are the flat ones:
:func:`flatten_observation` makes them (`rlflow.export.flat_observations` for an export); an
exported policy (`rlflow.load_policy`) records the env's space and takes the env's own
observations as well (`env_observation_space`).

>>> space = spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (2,)), "door": spaces.Discrete(3)})
>>> flatten_space(space).shape
(5,)
>>> flatten_observation(space, {"pos": np.array([0.5, -0.5]), "door": 2}).tolist()
[0.0, 0.0, 1.0, 0.5, -0.5]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.envs.multi_agent import AgentID, MultiAgentDict, MultiAgentEnv, MultiAgentStep
from rlflow.errors import ConfigError

__all__ = [
    "ACTION_MASK",
    "ActionMaskBox",
    "FlattenMultiAgentObservations",
    "FlattenObservations",
    "ObservationFlattener",
    "flatten_observation",
    "flatten_space",
    "action_mask_size",
    "env_observation_space",
    "needs_flattening",
    "unflattenable_part",
]

Array = npt.NDArray[Any]

ACTION_MASK = "action_mask"
"""The key of a ``Dict`` observation that holds the legal-action mask (1: legal)."""

_STRUCTURED = (spaces.Dict, spaces.Tuple, spaces.MultiDiscrete, spaces.MultiBinary)
_LEAVES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class _Part(NamedTuple):
    """Where one leaf of a space goes in the flat vector."""

    path: tuple[Any, ...]
    """Keys (Dict) and indexes (Tuple) from the observation to the leaf."""
    offset: int
    """First index of the leaf's values in the flat vector."""
    size: int
    """Number of values the leaf takes."""
    one_hot: Array | None
    """For Discrete/MultiDiscrete: per component, its first one-hot index (relative to
    ``offset``); None: values copied as they are."""
    starts: Array | None
    """For Discrete/MultiDiscrete: per component, its smallest value."""
    counts: Array | None
    """For Discrete/MultiDiscrete: per component, its number of values."""


def unflattenable_part(space: gym.Space[Any]) -> tuple[str, gym.Space[Any]] | None:
    """The first part of ``space`` that cannot be flattened, as ``(where, part)`` (``where``:
    ``"['key'][0]"`` from the top), or None when every part can.

    >>> unflattenable_part(spaces.Dict({"a": spaces.Tuple((spaces.Text(4),))}))
    ("['a'][0]", Text(1, 4, charset=...))
    """
    if isinstance(space, _LEAVES):
        return None
    if isinstance(space, spaces.Dict | spaces.Tuple):
        items = space.spaces.items() if isinstance(space, spaces.Dict) else enumerate(space)
        for key, sub in items:
            found = unflattenable_part(sub)
            if found is not None:
                return f"[{key!r}]{found[0]}", found[1]
        return None
    return "", space


def needs_flattening(space: gym.Space[Any]) -> bool:
    """Whether the env creator flattens observations of ``space``: a ``Dict``, ``Tuple``,
    ``MultiDiscrete`` or ``MultiBinary`` whose parts can all be flattened."""
    return isinstance(space, _STRUCTURED) and unflattenable_part(space) is None


class ActionMaskBox(spaces.Box[np.float32]):
    """The flat space of observations that carry an action mask: a float32 ``Box`` whose last
    ``action_mask_size`` values are the mask (1.0: the action is legal), the rest the
    observation proper (the module docstring)."""

    def __init__(self, low: Array, high: Array, *, action_mask_size: int) -> None:
        """A ``Box`` of shape ``(len(low),)``; its last ``action_mask_size`` values the mask."""
        super().__init__(low, high, (len(low),), np.float32)
        self.action_mask_size = int(action_mask_size)
        """How many of the last values are the action mask."""

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ActionMaskBox)
            and other.action_mask_size == self.action_mask_size
            and super().__eq__(other)
        )

    def __hash__(self) -> int:
        return hash((self.shape, self.action_mask_size))

    def __repr__(self) -> str:
        return f"ActionMaskBox({self.shape}, action_mask_size={self.action_mask_size})"


def action_mask_size(space: gym.Space[Any]) -> int:
    """How many of the last values of ``space``'s flat observations are an action mask (0:
    none)."""
    return int(getattr(space, "action_mask_size", 0))


def _parts(space: gym.Space[Any], path: tuple[Any, ...], offset: int) -> list[_Part]:
    """The leaves of ``space`` in flat order, starting at ``offset`` (a ``Dict``'s action mask,
    at the top level, last)."""
    if isinstance(space, spaces.Dict) and not path and ACTION_MASK in space.spaces:
        others = spaces.Dict({k: v for k, v in space.spaces.items() if k != ACTION_MASK})
        head = _parts(others, (), offset)
        end = head[-1].offset + head[-1].size if head else offset
        size = int(np.prod(space.spaces[ACTION_MASK].shape or ()))
        return [*head, _Part((ACTION_MASK,), end, size, None, None, None)]
    if isinstance(space, spaces.Dict | spaces.Tuple):
        items = space.spaces.items() if isinstance(space, spaces.Dict) else enumerate(space)
        out: list[_Part] = []
        for key, sub in items:
            out += _parts(sub, (*path, key), offset)
            offset = out[-1].offset + out[-1].size if out else offset
        return out
    if isinstance(space, spaces.Discrete):
        n, start = np.array([int(space.n)]), np.array([int(space.start)])
        return [_Part(path, offset, int(space.n), np.zeros(1, np.int64), start, n)]
    if isinstance(space, spaces.MultiDiscrete):
        nvec = space.nvec.reshape(-1).astype(np.int64)
        start = np.broadcast_to(np.asarray(space.start), space.nvec.shape).reshape(-1)
        firsts = np.concatenate([[0], np.cumsum(nvec)[:-1]]).astype(np.int64)
        return [_Part(path, offset, int(nvec.sum()), firsts, start.astype(np.int64), nvec)]
    if isinstance(space, spaces.Box | spaces.MultiBinary):
        return [_Part(path, offset, int(np.prod(space.shape)), None, None, None)]
    raise ConfigError(
        f"cannot flatten observation space part {space!r} at {path!r}: flattened parts are "
        "Box, Discrete, MultiDiscrete, MultiBinary, Dict and Tuple"
    )


def _choices(values: Array, part: _Part) -> Array:
    """``values`` of a Discrete/MultiDiscrete part as 0-based choices; `ValueError` when one
    is outside its component's range (it would set another part's one-hot entry)."""
    starts = np.zeros(1, np.int64) if part.starts is None else part.starts
    choices = values.astype(np.int64) - starts
    if np.any(choices < 0) or (part.counts is not None and np.any(choices >= part.counts)):
        raise ValueError(f"value {values.tolist()} outside the part's range")
    return choices


def _bounds(space: gym.Space[Any], part: _Part) -> tuple[Array, Array]:
    """The low and high bounds of one leaf's flat values."""
    leaf = space
    for key in part.path:
        leaf = leaf[key]  # type: ignore[index]
    if isinstance(leaf, spaces.Box):
        low = np.asarray(leaf.low, np.float32).reshape(-1)
        return low, np.asarray(leaf.high, np.float32).reshape(-1)
    return np.zeros(part.size, np.float32), np.ones(part.size, np.float32)


class ObservationFlattener:
    """Flattens observations of one space (see the module docstring); build once, call often.

    Args:
        space: a ``Dict``, ``Tuple``, ``MultiDiscrete``, ``MultiBinary``, ``Box`` or ``Discrete``
            space; `ConfigError` naming the part that cannot be flattened otherwise.
    """

    def __init__(self, space: gym.Space[Any]) -> None:
        """Lay out the parts of ``space`` and build the flat ``Box``."""
        self.original_space = space
        """The space the observations come in."""
        self.parts = tuple(_parts(space, (), 0))
        self.size = sum(part.size for part in self.parts)
        """Length of a flat observation."""
        bounds = [_bounds(space, part) for part in self.parts]
        low = np.concatenate([b[0] for b in bounds]) if bounds else np.zeros(0, np.float32)
        high = np.concatenate([b[1] for b in bounds]) if bounds else np.zeros(0, np.float32)
        self.space = spaces.Box(low, high, (self.size,), np.float32)
        if isinstance(space, spaces.Dict) and ACTION_MASK in space.spaces:
            self.space = ActionMaskBox(low, high, action_mask_size=self.parts[-1].size)
        """The flat observation space: a float32 ``Box`` of shape ``(size,)`` (an
        `ActionMaskBox` when the observations carry an action mask)."""

    def __call__(self, obs: Any) -> npt.NDArray[np.float32]:
        """The flat float32 vector of one observation; `ConfigError` naming the part when
        ``obs`` does not fit the space (a missing key, a wrong size)."""
        out = np.zeros(self.size, np.float32)
        for part in self.parts:
            try:
                value = obs
                for key in part.path:
                    value = value[key]
                flat = np.asarray(value).reshape(-1)
                if part.one_hot is None:
                    out[part.offset : part.offset + part.size] = flat
                else:
                    out[part.offset + part.one_hot + _choices(flat, part)] = 1.0
            except (KeyError, IndexError, TypeError, ValueError) as err:
                raise ConfigError(
                    f"FlattenObservations: observation part {part.path!r} does not fit "
                    f"{self.original_space} ({err!r}); fix the env or its observation_space"
                ) from None
        return out


def env_observation_space(env: Any, agent: AgentID | None = None) -> gym.Space[Any] | None:
    """The space of the observations ``env`` (as the env creator returns it) gets from the
    env it wraps, before :class:`FlattenObservations` or :class:`FlattenMultiAgentObservations`
    flattened them (``agent``'s, for a multi-agent env); None when they were not flattened.

    >>> env_observation_space(FlattenObservations(gym.make("Blackjack-v1")))
    Tuple(Discrete(32), Discrete(11), Discrete(2))
    """
    if isinstance(env, FlattenObservations):
        return env.flattener.original_space
    if isinstance(env, FlattenMultiAgentObservations) and agent in env.flatteners:
        return env.flatteners[agent].original_space
    return None


def flatten_space(space: gym.Space[Any]) -> spaces.Box:
    """The flat ``Box`` that observations of ``space`` become (see the module docstring)."""
    return ObservationFlattener(space).space


def flatten_observation(space: gym.Space[Any], obs: Any) -> npt.NDArray[np.float32]:
    """One observation of ``space`` flattened as the env creator's wrapper does (builds the
    layout on each call: for many observations keep an :class:`ObservationFlattener`)."""
    return ObservationFlattener(space)(obs)


class FlattenObservations(gym.ObservationWrapper[npt.NDArray[np.float32], Any, Any]):
    """An env whose observations are flattened (see the module docstring); the env creator
    applies it to single-agent envs whose observation space :func:`needs_flattening`.

    Unlike gymnasium's ``FlattenObservation`` it writes every ``Discrete`` part one-hot (so
    ``MultiDiscrete`` and nested ones too), and it raises `ConfigError` naming the part that
    does not fit.

    >>> env = FlattenObservations(gym.make("Blackjack-v1"))
    >>> env.observation_space.shape, float(env.reset(seed=0)[0].sum())
    ((45,), 3.0)
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        """Wrap ``env``; `ConfigError` if its observation space cannot be flattened."""
        super().__init__(env)
        self.flattener = ObservationFlattener(env.observation_space)
        """The layout of the flat observations."""
        self.observation_space = self.flattener.space

    def observation(self, observation: Any) -> npt.NDArray[np.float32]:
        """The flat observation."""
        return self.flattener(observation)


class FlattenMultiAgentObservations(MultiAgentEnv):
    """A multi-agent env whose agents' structured observations are flattened (each agent's
    space as :class:`FlattenObservations` does; other agents' observations pass unchanged).
    The env creator applies it when any agent's space :func:`needs_flattening`.
    """

    def __init__(self, env: MultiAgentEnv) -> None:
        """Wrap ``env``; `ConfigError` if an agent's space cannot be flattened."""
        self.env = env
        """The wrapped env."""
        self.possible_agents = list(env.possible_agents)
        self.flatteners = {
            agent: ObservationFlattener(space)
            for agent, space in env.observation_spaces.items()
            if needs_flattening(space)
        }
        """The layout of each flattened agent's observations."""
        self.observation_spaces = {
            agent: self.flatteners[agent].space if agent in self.flatteners else space
            for agent, space in env.observation_spaces.items()
        }
        self.action_spaces = dict(env.action_spaces)
        self.agents = list(env.agents)

    def _flat(self, obs: MultiAgentDict) -> MultiAgentDict:
        flat = self.flatteners
        return {a: flat[a](o) if a in flat else o for a, o in obs.items()}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset the wrapped env; its observations flattened."""
        obs, infos = self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        return self._flat(obs), infos

    def step(self, action_dict: Mapping[AgentID, Any]) -> MultiAgentStep:
        """Step the wrapped env; its observations flattened."""
        step = self.env.step(action_dict)
        self.agents = list(self.env.agents)
        return step._replace(obs=self._flat(step.obs))

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()

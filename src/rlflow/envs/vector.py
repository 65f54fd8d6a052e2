"""`VectorEnv`: N Gymnasium envs stepped in one in-process loop, with automatic reset.

For cheap environments a process per env loses to a plain loop (DESIGN.md, "Speed habits");
parallelism comes from rollout workers, each stepping one `VectorEnv`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple, Self

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.checks import check_int
from rlflow.errors import ConfigError, RLFlowError

logger = logging.getLogger(__name__)

Array = npt.NDArray[Any]

_STACKABLE = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


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


def _check_space(name: str, space: gym.Space[Any]) -> None:
    """Raise `ConfigError` unless ``space`` stacks into one numpy array."""
    if not isinstance(space, _STACKABLE):
        raise ConfigError(
            f"VectorEnv: {name} {space} is not supported; use Box, Discrete, MultiDiscrete or "
            "MultiBinary (flatten Dict/Tuple spaces with a gymnasium wrapper)"
        )


class VectorEnv:
    """N copies of an environment, stepped one after the other in this process.

    Sub-env ``i`` is reset with seed ``seed + i`` at the first reset, later resets are unseeded:
    episodes differ, yet a whole run is reproducible from ``seed`` (``None``: not seeded). The
    single-env `action_space` is seeded with ``seed`` too. A sub-env whose episode ends in
    `step` is reset at once (see `VectorStep`). Observations, rewards and flags are written into
    arrays allocated once; `step` and `reset` return copies of them unless ``copy=False``.

    Example:
        >>> venv = VectorEnv(lambda: gym.make("CartPole-v1"), num_envs=2, seed=0)
        >>> venv.reset().shape
        (2, 4)
        >>> venv.step(np.array([0, 1])).rewards.tolist()
        [1.0, 1.0]
        >>> venv.close()
    """

    def __init__(
        self, creator: Callable[[], gym.Env[Any, Any]], num_envs: int, seed: int | None
    ) -> None:
        """Build ``num_envs`` sub-envs with ``creator`` (they are not reset yet)."""
        num_envs = check_int(num_envs, "VectorEnv: num_envs", low=1)
        if seed is not None:
            seed = check_int(seed, "VectorEnv: seed", low=0)
        self.envs: list[gym.Env[Any, Any]] = [creator() for _ in range(num_envs)]
        self.num_envs = num_envs
        """Number of sub-envs."""
        self.observation_space: gym.Space[Any] = self.envs[0].observation_space
        """Observation space of one sub-env."""
        self.action_space: gym.Space[Any] = self.envs[0].action_space
        """Action space of one sub-env."""
        try:
            self._obs_dtype = self._check_spaces()
        except ConfigError:
            for env in self.envs:
                env.close()
            raise
        self._seed = seed
        self._seeded = False
        self._needs_reset = True
        self._closed = False
        if seed is not None:
            self.action_space.seed(seed)
        obs_shape = (num_envs, *self.observation_space.shape)  # type: ignore[misc]
        self._obs = np.zeros(obs_shape, dtype=self._obs_dtype)
        self._final_obs = np.zeros_like(self._obs)
        self._rewards = np.zeros(num_envs, dtype=np.float32)
        self._terminateds = np.zeros(num_envs, dtype=bool)
        self._truncateds = np.zeros(num_envs, dtype=bool)
        self._ep_returns = [0.0] * num_envs
        self._ep_lengths = [0] * num_envs
        self._episodes: list[EpisodeStat] = []

    def _check_spaces(self) -> Any:
        """Check that the sub-envs' spaces stack; return the observation dtype."""
        _check_space("observation space", self.observation_space)
        _check_space("action space", self.action_space)
        first = self.observation_space
        for i, env in enumerate(self.envs[1:], start=1):
            space = env.observation_space
            if (space.shape, space.dtype) != (first.shape, first.dtype):
                raise ConfigError(
                    f"VectorEnv: sub-env {i} has observation space {space} but sub-env 0 has "
                    f"{first}; shapes and dtypes must match to stack them"
                )
        return first.dtype

    def reset(self, *, copy: bool = True) -> Array:
        """Reset every sub-env and return the stacked first observations ``(N, *obs_shape)``.

        The first call seeds sub-env ``i`` with ``seed + i``. Episodes in progress are dropped
        from the statistics. With ``copy=False`` the returned array is an internal buffer, valid
        until the next `step` or `reset`.
        """
        self._check_open("reset")
        for i, env in enumerate(self.envs):
            seed = None if self._seeded or self._seed is None else self._seed + i
            self._obs[i], _ = env.reset(seed=seed)
        self._seeded = True
        self._needs_reset = False
        self._ep_returns = [0.0] * self.num_envs
        self._ep_lengths = [0] * self.num_envs
        return self._obs.copy() if copy else self._obs

    def step(self, actions: npt.ArrayLike, *, copy: bool = True) -> VectorStep:
        """Step every sub-env with its row of ``actions``, resetting those whose episode ends.

        ``actions`` has shape ``(N,)`` for Discrete spaces and ``(N, *action_shape)`` otherwise;
        Box actions are clipped to the space bounds first. Finished episodes are recorded for
        `pop_episode_stats`. With ``copy=False`` the arrays returned are internal buffers,
        valid until the next `step` or `reset`.
        """
        self._check_open("step")
        if self._needs_reset:
            raise RLFlowError("VectorEnv.step() was called before reset(); call reset() first")
        finished = self._step_envs(self._action_rows(np.asarray(actions)))
        obs, final_obs = self._obs, self._final_obs
        final_obs[...] = obs
        for i, last_ob in finished:
            final_obs[i] = last_ob
        rewards, terminateds, truncateds = self._rewards, self._terminateds, self._truncateds
        if copy:
            return VectorStep(
                obs.copy(), rewards.copy(), terminateds.copy(), truncateds.copy(), final_obs.copy()
            )
        return VectorStep(obs, rewards, terminateds, truncateds, final_obs)

    def _step_envs(self, rows: Any) -> list[tuple[int, Any]]:
        """Step and auto-reset every sub-env; return (index, last obs) of finished episodes."""
        obs, returns, lengths = self._obs, self._ep_returns, self._ep_lengths
        finished: list[tuple[int, Any]] = []
        # Scalars go to lists and the numpy buffers are written once per step: a numpy scalar
        # write per sub-env costs a noticeable part of a cheap env's step.
        step_rewards, step_terms, step_truncs = [], [], []
        for i, env in enumerate(self.envs):
            ob, reward, terminated, truncated, _ = env.step(rows[i])
            step_rewards.append(reward)
            step_terms.append(terminated)
            step_truncs.append(truncated)
            returns[i] += float(reward)
            lengths[i] += 1
            if terminated or truncated:
                self._episodes.append(EpisodeStat(returns[i], lengths[i]))
                returns[i], lengths[i] = 0.0, 0
                finished.append((i, ob))
                ob, _ = env.reset()
            obs[i] = ob
        self._rewards[:] = step_rewards
        self._terminateds[:] = step_terms
        self._truncateds[:] = step_truncs
        return finished

    def _action_rows(self, actions: Array) -> Any:
        """Check the shape of ``actions`` and convert them to one action per sub-env."""
        space = self.action_space
        expected = (self.num_envs, *space.shape)  # type: ignore[misc]
        if actions.shape != expected:
            raise ConfigError(
                f"VectorEnv.step: actions have shape {actions.shape}, expected {expected} "
                f"for {self.num_envs} sub-envs with action space {space}"
            )
        return env_actions(space, actions)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle support (worker checkpoints), with the emulator state of ALE sub-envs.

        A pickled ALE env comes back with its settings but a fresh emulator, so the episode
        trackers here would not match it: each sub-env whose unwrapped env has
        ``clone_state`` / ``restore_state`` (ale_py) also saves ``clone_state(include_rng=True)``
        and gets it back on unpickling, and the restored envs continue exactly.
        """
        state = dict(self.__dict__)
        state["_emulator_states"] = [
            env.unwrapped.clone_state(include_rng=True)  # type: ignore[attr-defined]
            if callable(getattr(env.unwrapped, "clone_state", None))
            and callable(getattr(env.unwrapped, "restore_state", None))
            else None
            for env in self.envs
        ]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`__getstate__` (emulator states included)."""
        emulator_states = state.pop("_emulator_states", None) or [None] * len(state["envs"])
        self.__dict__.update(state)
        for env, emulator in zip(self.envs, emulator_states, strict=True):
            if emulator is not None:
                env.unwrapped.restore_state(emulator)  # type: ignore[attr-defined]

    def pop_episode_stats(self) -> list[EpisodeStat]:
        """Return the episodes finished since the last call, in the order they ended."""
        episodes, self._episodes = self._episodes, []
        return episodes

    def close(self) -> None:
        """Close every sub-env; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        for env in self.envs:
            env.close()

    def __enter__(self) -> Self:
        """Return self; `close` runs on exit."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the sub-envs."""
        self.close()

    def _check_open(self, method: str) -> None:
        """Raise if the env was closed."""
        if self._closed:
            raise RLFlowError(f"VectorEnv.{method}() was called after close()")

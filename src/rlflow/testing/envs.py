"""Tiny deterministic environments for tests: every value is known in advance; `CrashingEnv`
(`rlflow.envs.crashing`), a wrapper that raises in ``step``/``reset`` on cue or with a
probability, for tests of ``restart_failed_sub_environments``; `ScaleObservation`, a badly
scaled env for tests of ``observation_filter``; and `NonFiniteSteps`, an env whose rewards or
observations turn NaN or infinite on cue, for tests of ``on_nonfinite``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.checks import check_int
from rlflow.envs.crashing import CrashingEnv, EnvCrashError

__all__ = ["CountingEnv", "CrashingEnv", "EnvCrashError", "NonFiniteSteps", "ScaleObservation"]


class CountingEnv(gym.Env[npt.NDArray[np.float32], np.int64]):
    """Observation = steps taken so far; reward 1.0 per step; ends after ``episode_len`` steps.

    ``reset`` returns ``[0.0]``; the k-th `step` returns ``[float(k)]`` (shape ``(1,)``,
    float32), reward 1.0, and ends the episode when ``k == episode_len``: terminated, or
    truncated with ``truncate=True``. Actions (``Discrete(2)``, or ``Box(-1, 1, (1,))`` with
    ``continuous=True``) are ignored, and so is the seed, so every episode is identical: return
    ``episode_len``, length ``episode_len``.

    Example:
        >>> env = CountingEnv(episode_len=2)
        >>> env.reset()[0].tolist()
        [0.0]
        >>> env.step(0)[:3]
        (array([1.], dtype=float32), 1.0, False)
        >>> env.step(1)[:4]
        (array([2.], dtype=float32), 1.0, True, False)
    """

    def __init__(
        self, episode_len: int = 5, *, truncate: bool = False, continuous: bool = False
    ) -> None:
        """Make an env whose episodes last ``episode_len`` (>= 1) steps."""
        check_int(episode_len, "CountingEnv: episode_len", low=1)
        self.episode_len = episode_len
        """Steps per episode."""
        self.truncate = truncate
        """End episodes by truncation instead of termination."""
        self.observation_space = spaces.Box(0.0, np.inf, (1,), np.float32)
        self.action_space: spaces.Space[Any] = (
            spaces.Box(-1.0, 1.0, (1,), np.float32) if continuous else spaces.Discrete(2)
        )
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """Start an episode: observation ``[0.0]``, empty info."""
        super().reset(seed=seed)
        self._t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(
        self, action: int | np.int64
    ) -> tuple[npt.NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        """Advance the counter; reward 1.0; the episode ends at ``episode_len`` steps."""
        self._t += 1
        done = self._t >= self.episode_len
        obs = np.array([float(self._t)], dtype=np.float32)
        return obs, 1.0, done and not self.truncate, done and self.truncate, {}


class ScaleObservation(gym.ObservationWrapper[Any, Any, Any]):
    """Multiplies a Box env's observations by ``scale`` (its space's bounds too): a badly
    scaled env, e.g. CartPole-v1 times 1000, for ``env_wrappers``::

        env_wrappers=[{"name": "rlflow.testing.envs.ScaleObservation", "kwargs": {"scale": 1000}}]
    """

    def __init__(self, env: gym.Env[Any, Any], scale: float = 1000.0) -> None:
        """Wrap ``env`` (its observation space must be a Box)."""
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Box):
            raise TypeError(f"ScaleObservation needs a Box observation space, got {space}")
        self.scale = float(scale)
        """The factor."""
        a, b = space.low * self.scale, space.high * self.scale
        low, high = np.minimum(a, b), np.maximum(a, b)
        self.observation_space = spaces.Box(low, high, space.shape, space.dtype)

    def observation(self, observation: Any) -> Any:
        """``observation * scale``, in the space's dtype."""
        space = self.observation_space
        return (np.asarray(observation) * self.scale).astype(space.dtype)


class NonFiniteSteps(gym.Wrapper[Any, Any, Any, Any]):
    """Makes the reward (``field="reward"``) or the observation (``field="observation"``) of
    chosen steps ``value`` (NaN by default): the steps ``at_steps`` and, with ``after``, every
    step from the ``after``-th on, counted over the env's whole life from 1 (resets do not
    restart the count). For ``env_wrappers``::

        env_wrappers=[{"name": "rlflow.testing.envs.NonFiniteSteps", "kwargs": {"after": 300}}]

    Example:
        >>> env = NonFiniteSteps(CountingEnv(episode_len=5), at_steps=[2])
        >>> _ = env.reset()
        >>> env.step(0)[1], env.step(0)[1], env.step(0)[1]
        (1.0, nan, 1.0)
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        at_steps: list[int] | tuple[int, ...] = (),
        after: int | None = None,
        field: str = "reward",
        value: float = float("nan"),
    ) -> None:
        """Wrap ``env``; see the class docstring."""
        super().__init__(env)
        if field not in ("reward", "observation"):
            raise ValueError(f"NonFiniteSteps: field={field!r} must be 'reward' or 'observation'")
        self.at_steps = frozenset(int(k) for k in at_steps)
        """Steps (of the env's life, from 1) made non-finite."""
        self.after = after
        """Every step from this one on is made non-finite (None: none)."""
        self.field = field
        """What is made non-finite: ``"reward"`` or ``"observation"``."""
        self.value = float(value)
        """The number put there (NaN, inf or -inf)."""
        self.steps = 0
        """Steps taken over the env's life."""

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step the env; on a chosen step, put `value` in `field`."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps in self.at_steps or (self.after is not None and self.steps >= self.after):
            if self.field == "reward":
                reward = self.value
            else:
                obs = np.full_like(obs, self.value)
        return obs, reward, terminated, truncated, info

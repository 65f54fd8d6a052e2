"""`CrashingEnv`: a wrapper whose ``step`` and ``reset`` raise now and then, like a flaky
simulator (RLlib's ``CartPoleCrashing``); the test env of ``restart_failed_sub_environments``.

Importing `rlflow.envs` registers :data:`CARTPOLE_CRASHING_ID` (``rlflow/CartPoleCrashing-v1``:
CartPole-v1 that crashes with probability ``p_crash`` per step, ``p_crash_reset`` per reset).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rlflow.checks import check_number

__all__ = ["CARTPOLE_CRASHING_ID", "CrashingEnv", "EnvCrashError", "make_cartpole_crashing"]

CARTPOLE_CRASHING_ID = "rlflow/CartPoleCrashing-v1"
"""Gymnasium id of `make_cartpole_crashing` (kwargs: ``p_crash``, ``p_crash_reset``, ...)."""


class EnvCrashError(RuntimeError):
    """The simulated failure that `CrashingEnv` raises."""


class CrashingEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Wraps ``env``; ``step`` raises `EnvCrashError` with probability ``p_crash``, ``reset``
    with probability ``p_crash_reset``, and each also raises on the counts given (1-based
    counts of this instance's ``step`` / ``reset`` calls, for tests that need exact crashes).

    The crash draws come from a generator seeded by ``seed`` and re-seeded by every seeded
    ``reset`` (from the reset's seed), so a seeded run crashes at the same steps every time,
    and an env rebuilt with a new seed crashes elsewhere. Unseeded: fresh entropy.

    Example:
        >>> env = CrashingEnv(gym.make("CartPole-v1"), crash_on_steps=(2,))
        >>> _ = env.reset(seed=0)
        >>> _ = env.step(0)
        >>> env.step(0)
        Traceback (most recent call last):
        ...
        rlflow.envs.crashing.EnvCrashError: CrashingEnv: simulated crash in step 2
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        p_crash: float = 0.0,
        p_crash_reset: float = 0.0,
        *,
        crash_on_steps: Sequence[int] = (),
        crash_on_resets: Sequence[int] = (),
        seed: int | None = None,
    ) -> None:
        """Wrap ``env`` (see the class docstring)."""
        super().__init__(env)
        self.p_crash = float(check_number(p_crash, "CrashingEnv: p_crash", low=0, high=1))
        """Probability that a step raises."""
        self.p_crash_reset = float(
            check_number(p_crash_reset, "CrashingEnv: p_crash_reset", low=0, high=1)
        )
        """Probability that a reset raises."""
        self._crash_steps = frozenset(crash_on_steps)
        self._crash_resets = frozenset(crash_on_resets)
        self._rng = np.random.default_rng(seed)
        self.num_steps = 0
        """Calls of ``step`` so far (crashed ones included)."""
        self.num_resets = 0
        """Calls of ``reset`` so far (crashed ones included)."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the wrapped env, unless this reset is one that crashes."""
        self.num_resets += 1
        if seed is not None:
            self._rng = np.random.default_rng([seed, 0xC0FFEE])
        crash = self.p_crash_reset > 0 and self._rng.random() < self.p_crash_reset
        if crash or self.num_resets in self._crash_resets:
            raise EnvCrashError(f"CrashingEnv: simulated crash in reset {self.num_resets}")
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step the wrapped env, unless this step is one that crashes."""
        self.num_steps += 1
        crash = self.p_crash > 0 and self._rng.random() < self.p_crash
        if crash or self.num_steps in self._crash_steps:
            raise EnvCrashError(f"CrashingEnv: simulated crash in step {self.num_steps}")
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, bool(terminated), bool(truncated), info


def make_cartpole_crashing(
    p_crash: float = 1e-3, p_crash_reset: float = 0.0, **kwargs: Any
) -> gym.Env[Any, Any]:
    """CartPole-v1 in a `CrashingEnv` (``kwargs``: the wrapper's keywords, e.g. ``seed``)."""
    return CrashingEnv(gym.make("CartPole-v1"), p_crash, p_crash_reset, **kwargs)

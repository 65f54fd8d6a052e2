"""Values that move with the env steps: `PiecewiseSchedule` and `LinearSchedule`.

`PiecewiseSchedule`: a value given at a few timesteps, linearly interpolated in between.

The shape of RLlib's ``lr_schedule`` and ``entropy_coeff_schedule`` config values: a list of
``[timestep, value]`` pairs with nondecreasing timesteps, the first at 0. Before the first
point the first value holds, after the last point the last value holds:

>>> schedule = PiecewiseSchedule.from_points([[0, 1e-3], [100_000, 0.0]], "PPOConfig.lr_schedule")
>>> schedule.value(50_000)
0.0005
>>> schedule.value(250_000)
0.0
>>> PiecewiseSchedule.from_points([[10, 1.0]], "PPOConfig.lr_schedule")
Traceback (most recent call last):
...
rlflow.errors.ConfigError: PPOConfig.lr_schedule=[[10, 1.0]] must start at timestep 0, got 10

Timesteps are env steps sampled (the global var ``timestep``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlflow.checks import check_int, check_number
from rlflow.errors import ConfigError, ConfigTypeError

__all__ = ["LinearSchedule", "PiecewiseSchedule"]


@dataclass(frozen=True)
class PiecewiseSchedule:
    """Values at ``timesteps`` (nondecreasing, the first 0), linear in between, flat outside."""

    timesteps: tuple[int, ...]
    """Where the values are given, in env steps."""
    values: tuple[float, ...]
    """The value at each of ``timesteps``."""

    @classmethod
    def from_points(cls, points: Any, label: str, *, low: float = 0.0) -> PiecewiseSchedule:
        """Check ``points`` (``[[timestep, value], ...]``, values >= ``low``) and build the
        schedule; a `ConfigError` naming ``label`` says what is wrong."""
        shape = "a non-empty list of [timestep, value] pairs"
        if isinstance(points, str | bytes) or not isinstance(points, Sequence) or not points:
            raise ConfigTypeError(f"{label}={points!r} must be {shape}")
        timesteps: list[int] = []
        values: list[float] = []
        for k, point in enumerate(points):
            if isinstance(point, str | bytes) or not isinstance(point, Sequence) or len(point) != 2:
                raise ConfigTypeError(f"{label}={points!r} must be {shape}; item {k} is {point!r}")
            timesteps.append(check_int(point[0], f"{label}[{k}][0] (timestep)", low=0))
            values.append(check_number(point[1], f"{label}[{k}][1] (value)", low=low))
        if timesteps[0] != 0:
            raise ConfigError(f"{label}={points!r} must start at timestep 0, got {timesteps[0]}")
        for k in range(1, len(timesteps)):
            if timesteps[k] < timesteps[k - 1]:
                raise ConfigError(
                    f"{label}={points!r} must have nondecreasing timesteps; item {k} "
                    f"({timesteps[k]}) comes before item {k - 1} ({timesteps[k - 1]})"
                )
        return cls(tuple(timesteps), tuple(values))

    def value(self, timestep: int) -> float:
        """The value at ``timestep``."""
        k = bisect.bisect_right(self.timesteps, timestep)
        if k == 0:
            return self.values[0]
        if k == len(self.timesteps):
            return self.values[-1]
        t0, t1 = self.timesteps[k - 1], self.timesteps[k]
        v0, v1 = self.values[k - 1], self.values[k]
        return v0 + (v1 - v0) * (timestep - t0) / (t1 - t0)


@dataclass(frozen=True, kw_only=True)
class LinearSchedule:
    """A value moving linearly from ``initial`` to ``final`` over ``steps``, then constant.

    Use for the importance-sampling exponent: ``beta = LinearSchedule(initial=0.4, final=1.0,
    steps=100_000)`` then ``buffer.sample(32, beta=beta.value(timestep))``.

    Example:
        >>> LinearSchedule(initial=0.4, final=1.0, steps=10).value(5)
        0.7
    """

    initial: float
    """Value at step 0."""
    final: float
    """Value from ``steps`` on."""
    steps: int
    """Number of steps (env steps, usually) of the ramp, >= 0; 0 means ``final`` at once."""

    def __post_init__(self) -> None:
        """Check that ``steps`` is an int >= 0."""
        check_int(self.steps, "LinearSchedule: steps", low=0)

    def value(self, step: int) -> float:
        """The value at ``step`` (steps before 0 count as 0)."""
        if self.steps == 0:
            return float(self.final)
        frac = min(1.0, max(0.0, step / self.steps))
        return float(self.initial + frac * (self.final - self.initial))

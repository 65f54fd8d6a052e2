"""`LinearSchedule`: a value ramped linearly over a number of steps (e.g. the PER exponent beta)."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.checks import check_int

__all__ = ["LinearSchedule"]


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

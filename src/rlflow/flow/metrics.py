"""The per-plan shared context ("message passing" in the paper) and its statistics.

Every operator call of a running plan sees the plan's :class:`MetricsContext` through
:func:`current_metrics`. The context is set around each call of a user function and reset
right after, with a :class:`contextvars.ContextVar`, so it never leaks between plans, threads or
actors.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from rlflow.errors import ContextError

# Keys of the built-in statistics; one place, never scattered strings.
STAGE_ITEMS = "items"
STAGE_FN_TIME = "fn_time_s"
STAGE_WAIT_TIME = "wait_time_s"


class TimerStat:
    """Accumulates durations of a repeated activity: count, total, mean and units/s.

    >>> t = TimerStat()
    >>> t.push(0.5, units=10)
    >>> t.push(1.5, units=30)
    >>> (t.count, t.total_s, t.mean_s, t.mean_throughput)
    (2, 2.0, 1.0, 20.0)
    """

    __slots__ = ("_start", "count", "total_s", "units")

    def __init__(self) -> None:
        self.count = 0
        self.total_s = 0.0
        self.units = 0.0
        self._start: float | None = None

    def push(self, seconds: float, units: float = 0.0) -> None:
        """Record one activity of ``seconds`` that processed ``units`` (items, steps, ...)."""
        self.count += 1
        self.total_s += seconds
        self.units += units

    @contextmanager
    def timing(self, units: float = 0.0) -> Iterator[None]:
        """Context manager that pushes the time spent inside it."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.push(time.perf_counter() - start, units)

    @property
    def mean_s(self) -> float:
        """Mean duration in seconds (0.0 before the first push)."""
        return self.total_s / self.count if self.count else 0.0

    @property
    def mean_throughput(self) -> float:
        """Units per second over all pushes (0.0 when no time was recorded)."""
        return self.units / self.total_s if self.total_s > 0 else 0.0

    def __repr__(self) -> str:
        return f"TimerStat(count={self.count}, mean_s={self.mean_s:.6f})"


@dataclass(slots=True)
class StageStats:
    """What one stage of a plan did: items out, time in user code, time waiting on actors."""

    items: int = 0
    fn_time_s: float = 0.0
    wait_time_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        """The stats as a plain dict keyed by the ``STAGE_*`` constants."""
        return {
            STAGE_ITEMS: self.items,
            STAGE_FN_TIME: self.fn_time_s,
            STAGE_WAIT_TIME: self.wait_time_s,
        }


@dataclass
class MetricsContext:
    """The shared context of one running plan.

    Attributes:
        counters: integer counters (e.g. env steps sampled), start at 0.
        timers: named :class:`TimerStat` objects, created on first use.
        info: free-form values operators publish (e.g. learner stats).
        current_actor: handle of the actor that produced the current item; set by
            ``gather_async`` and by ``get_shard`` before each item is handed downstream.
        stages: per-stage :class:`StageStats`, keyed by the stage's label.
    """

    counters: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    timers: defaultdict[str, TimerStat] = field(default_factory=lambda: defaultdict(TimerStat))
    info: dict[str, Any] = field(default_factory=dict)
    current_actor: Any = None
    stages: dict[str, StageStats] = field(default_factory=dict)

    def stage(self, label: str) -> StageStats:
        """The stats object of stage ``label`` (created empty on first use)."""
        stats = self.stages.get(label)
        if stats is None:
            stats = self.stages[label] = StageStats()
        return stats

    def save(self) -> dict[str, Any]:
        """A picklable snapshot of counters and info (timers and stage stats are not kept)."""
        return {"counters": dict(self.counters), "info": dict(self.info)}

    def restore(self, state: dict[str, Any]) -> None:
        """Load a snapshot made by :meth:`save`; timers and stage stats start afresh."""
        self.counters = defaultdict(int, state.get("counters", {}))
        self.info = dict(state.get("info", {}))
        self.timers = defaultdict(TimerStat)
        self.stages = {}


class SharedMetrics:
    """A cell pointing at a :class:`MetricsContext`, shared by every iterator of one chain.

    ``union`` re-points the cells of all its inputs (and, recursively, their parents) at one fresh
    context, so concurrent sub-flows write to one place.
    """

    __slots__ = ("_metrics", "_parents")

    def __init__(
        self, metrics: MetricsContext | None = None, parents: list[SharedMetrics] | None = None
    ) -> None:
        self._parents = list(parents or [])
        self._metrics = metrics if metrics is not None else MetricsContext()
        self.set(self._metrics)

    def set(self, metrics: MetricsContext) -> None:
        """Point this cell and all its parents at ``metrics``."""
        self._metrics = metrics
        for parent in self._parents:
            parent.set(metrics)

    def get(self) -> MetricsContext:
        """The context this cell points at."""
        return self._metrics


_CURRENT: ContextVar[MetricsContext | None] = ContextVar("rlflow_current_metrics", default=None)


def current_metrics() -> MetricsContext:
    """The shared context of the plan whose operator is running now.

    Call it inside a function given to an operator (``for_each``, ``filter``, ``combine``,
    ``transform``, ...) while the plan is iterated. Elsewhere it raises :class:`ContextError`.
    """
    ctx = _CURRENT.get()
    if ctx is None:
        raise ContextError(
            "flow.current_metrics() was called outside a running plan: call it only inside a "
            "function given to an operator (for_each, filter, combine, transform, ...) while the "
            "plan is being iterated; outside, read `iterator.metrics` instead."
        )
    return ctx


def set_current(ctx: MetricsContext | None) -> Any:
    """Make ``ctx`` the current context; returns a token for :func:`reset_current`."""
    return _CURRENT.set(ctx)


def reset_current(token: Any) -> None:
    """Undo the :func:`set_current` call that returned ``token``."""
    _CURRENT.reset(token)

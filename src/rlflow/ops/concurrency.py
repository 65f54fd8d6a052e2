"""Concurrency operators: run sub-flows side by side, and hand work to a learner thread.

- :func:`concurrently` mixes several sub-flows into one stream (round robin, optionally
  weighted, or async), keeping only the outputs of some of them; the others still run for their
  side effects (storing to a replay buffer, pushing weights).
- :class:`Enqueue` / :func:`dequeue` connect a plan to a :class:`LearnerThread` through bounded
  queues without ever blocking the plan: a full or empty queue answers ``NOT_READY`` and the
  plan's waiter polls it again with back-off (no busy spinning).

The learner thread itself and :class:`~rlflow.ops.learner_thread.RecordStepsTrained` live in
:mod:`rlflow.ops.learner_thread`.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, NamedTuple

from rlflow import flow
from rlflow.checks import check_int, check_number
from rlflow.errors import ConfigError, WorkerError
from rlflow.flow import NOT_READY, LocalIterator

__all__ = [
    "Enqueue",
    "Tagged",
    "concurrently",
    "dequeue",
]

logger = logging.getLogger(__name__)

ConcurrencyMode = Literal["round_robin", "async"]
_MODES = ("round_robin", "async")


# ------------------------------------------------------------------------------ concurrently
class Tagged(NamedTuple):
    """An item of :func:`concurrently`'s merged stream, tagged with the index of its sub-flow."""

    op_index: int
    """Position of the op in ``concurrently``'s list."""
    item: Any
    """The op's item."""


class _Tag:
    def __init__(self, index: int) -> None:
        self.index = index

    def __call__(self, item: Any) -> Tagged:
        return Tagged(self.index, item)


class _KeepIndexes:
    def __init__(self, indexes: frozenset[int]) -> None:
        self.indexes = indexes

    def __call__(self, tagged: Tagged) -> bool:
        return tagged.op_index in self.indexes


def _untag(tagged: Tagged) -> Any:
    return tagged.item


def _check_weights(weights: Sequence[float | str], num_ops: int) -> list[float | str]:
    out = list(weights)
    if len(out) != num_ops:
        raise ConfigError(
            f"concurrently(round_robin_weights={out!r}) has {len(out)} weights for {num_ops} "
            "ops; give one per op"
        )
    for k, w in enumerate(out):
        if w != "*":
            check_number(
                w,
                f"concurrently: round_robin_weights[{k}] (a number > 0 or '*')",
                low=0,
                low_open=True,
            )
    if all(w == "*" for w in out):
        raise ConfigError(
            f'concurrently(round_robin_weights={out!r}): not every weight may be "*" (each '
            "pass would only poll); give at least one op a number"
        )
    return out


def _check_output_indexes(indexes: Sequence[int], num_ops: int) -> frozenset[int]:
    out = list(indexes)
    if not out:
        raise ConfigError("concurrently(output_indexes=[]): keep at least one op's output")
    for i in out:
        check_int(i, "concurrently: each of output_indexes")
        if not 0 <= i < num_ops:
            raise ConfigError(
                f"concurrently(output_indexes={out!r}): index {i!r} is out of range "
                f"[0, {num_ops}) for {num_ops} ops"
            )
    return frozenset(out)


def concurrently(
    ops: Sequence[LocalIterator[Any]],
    *,
    mode: ConcurrencyMode = "round_robin",
    output_indexes: Sequence[int] | None = None,
    round_robin_weights: Sequence[float | str] | None = None,
) -> LocalIterator[Any]:
    """Run sub-flows side by side as one stream; lazy (a combinator built on ``flow.union``).

    Items: the items of the ops whose index is in ``output_indexes`` (default: all), untouched.
    The other ops still run every time the merged stream is read; their items are dropped after
    their side effects happened.

    Order and blocking:

    - ``"round_robin"``: passes over the ops in order; in each pass op i gives up to
      ``round_robin_weights[i]`` items (default 1; a fraction is rounded at random with a fixed
      seed; ``"*"`` = as many as are ready without waiting, at most 100). Numbered ops block for
      their items, so the order is exact, except that an op answering ``NOT_READY`` (e.g.
      :func:`~rlflow.ops.replay` below ``learning_starts``, or :func:`dequeue` on an empty
      queue) ends its turn early.
    - ``"async"``: every op is polled; items come in whatever order they are ready, and when
      none is ready the reader waits on all of them at once.

    Ends when every op has ended. All ops share one context (counters, info).

    Errors (:class:`ConfigError`, when called): fewer than 2 ops, an unknown ``mode``, weights
    with ``mode="async"``, all weights ``"*"``, a weight <= 0, an output index out of range.

    >>> from rlflow import flow
    >>> a, b = flow.from_iterable([1, 2, 3]), flow.from_iterable([10, 20, 30, 40, 50, 60])
    >>> concurrently([a, b], round_robin_weights=[1, 2]).take(9)
    [1, 10, 20, 2, 30, 40, 3, 50, 60]
    >>> a, b = flow.from_iterable([1, 2, 3]), flow.from_iterable([10, 20])
    >>> concurrently([a, b], output_indexes=[1]).take(5)
    [10, 20]
    """
    children = list(ops)
    if len(children) < 2:
        raise ConfigError(f"concurrently() needs at least 2 ops, got {len(children)}")
    for i, op in enumerate(children):
        if not isinstance(op, LocalIterator):
            raise ConfigError(
                f"concurrently(): op {i} must be a LocalIterator, got {type(op).__name__}"
            )
    if mode not in _MODES:
        raise ConfigError(f"concurrently(mode={mode!r}): mode must be one of {_MODES}")
    weights: list[float | str] | None = None
    if round_robin_weights is not None:
        if mode != "round_robin":
            raise ConfigError(
                f"concurrently(mode={mode!r}, round_robin_weights=...): weights are only "
                "allowed with mode='round_robin'"
            )
        weights = _check_weights(round_robin_weights, len(children))
    keep = None if output_indexes is None else _check_output_indexes(output_indexes, len(children))
    tagged = [op.for_each(_Tag(i)) for i, op in enumerate(children)]
    merged = flow.union(tagged, deterministic=mode == "round_robin", round_robin_weights=weights)
    if keep is not None and len(keep) < len(children):
        merged = merged.filter(_KeepIndexes(keep))
    return merged.for_each(_untag)


# ------------------------------------------------------------------------------ queues
def _check_queue(q: Any, where: str) -> queue.Queue[Any]:
    if not isinstance(q, queue.Queue):
        raise ConfigError(f"{where} takes a queue.Queue, got {type(q).__name__}: {q!r}")
    return q


class Enqueue:
    """Put each item into a bounded queue without blocking; backpressure when it is full.

    Items: any ``T -> T`` (the item, once it is in the queue). Use with ``.for_each``. When the
    queue is full the call answers ``NOT_READY``: the stream gives ``NOT_READY`` (a concurrent
    union moves on to its other ops) and the same item is offered again on a later read, so
    nothing is dropped and upstream is not read meanwhile. Side effect: the queue.

    >>> import queue
    >>> from rlflow import flow
    >>> q = queue.Queue(maxsize=2)
    >>> flow.from_iterable([1, 2]).for_each(Enqueue(q)).take(2), q.qsize()
    ([1, 2], 2)
    """

    def __init__(self, q: queue.Queue[Any]) -> None:
        """Check that ``q`` is a ``queue.Queue``."""
        self.queue = _check_queue(q, "Enqueue")

    def __call__(self, item: Any) -> Any:
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            return NOT_READY
        return item


def _always_true() -> bool:
    return True


class _Forever:
    """An endless iterable of None: the ticks that drive a polling source."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class _DequeueOne:
    """``for_each`` function of :func:`dequeue`: one queue item, or NOT_READY when empty."""

    def __init__(self, q: queue.Queue[Any], check: Callable[[], bool]) -> None:
        self.queue = q
        self.check = check

    def __call__(self, _tick: None) -> Any:
        try:
            return self.queue.get_nowait()
        except queue.Empty:
            pass
        if not self.check():
            raise WorkerError(
                "dequeue: the queue is empty and check() returned False (the producer "
                "stopped); nothing more will arrive"
            )
        return NOT_READY


def dequeue(q: queue.Queue[Any], *, check: Callable[[], bool] = _always_true) -> LocalIterator[Any]:
    """Source: the items taken from a queue filled outside the plan (a learner thread); lazy.

    Items: whatever the producer puts, in queue order. When the queue is empty the stream gives
    ``NOT_READY`` (a concurrent union moves on; read alone, the reader sleeps with a short
    growing back-off: it never spins). Each time the queue is found empty, ``check()`` is
    called: it may raise (:meth:`LearnerThread.check` re-raises the thread's own exception) or
    return False, which raises :class:`WorkerError`. Never ends by itself. No side effects
    beyond taking items from the queue.

    >>> import queue
    >>> q = queue.Queue()
    >>> for i in range(3):
    ...     q.put(i)
    >>> dequeue(q).take(3)
    [0, 1, 2]
    """
    _check_queue(q, "dequeue")
    if not callable(check):
        raise ConfigError(f"dequeue(check={check!r}) must be a zero-argument callable")
    ticks = flow.from_iterable(_Forever(), name="dequeue")
    return ticks.for_each(_DequeueOne(q, check))

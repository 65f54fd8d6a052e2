"""Merging and splitting local streams: the bases of ``union`` and ``duplicate``.

`rlflow.flow.local.union` and `rlflow.flow.local.duplicate` (``flow.union``,
``LocalIterator.union``, ``LocalIterator.duplicate``) check their arguments and build the
iterators; the bases here are what those iterators run: functions ``env -> iterator`` (see
`rlflow.flow.local.BaseFn`) that read their inputs through ``LocalIterator._build``. They never
make an iterator, so this module needs `LocalIterator` for its types only.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rlflow.flow.sentinels import NOT_READY
from rlflow.flow.stages import BuildEnv

if TYPE_CHECKING:
    from rlflow.flow.local import LocalIterator

__all__ = ["DuplicateBase", "DuplicateState", "UnionBase"]

_STAR_MAX_PULL = 100
"""How many items a ``"*"`` input may give in one pass (as in the original)."""


class UnionBase:
    """The base of a union: passes over ``children``; in each, child i gives up to
    ``weights[i]`` items (``"*"``: as many as are ready, at most 100), read with
    ``timeouts[i]`` (None: block; 0: poll). See `rlflow.flow.local.union`."""

    def __init__(
        self,
        children: Sequence[LocalIterator[Any]],
        timeouts: Sequence[float | None],
        weights: Sequence[float | str],
    ) -> None:
        self.children = list(children)
        self.timeouts = list(timeouts)
        self.weights = list(weights)

    def close(self) -> None:
        """Close every input (``LocalIterator.close``)."""
        for child in self.children:
            child.close()

    def __call__(self, env: BuildEnv) -> Iterator[Any]:
        waiter = env.waiter
        rng = random.Random(0)
        active: list[tuple[float | str, Iterator[Any]]] = [
            (weight, child._build(t, waiter))
            for child, t, weight in zip(self.children, self.timeouts, self.weights, strict=True)
        ]
        while active:
            yielded = False
            for entry in list(active):
                weight, it = entry
                if weight == "*":
                    max_pull = _STAR_MAX_PULL
                else:
                    whole = int(weight)
                    max_pull = whole + (1 if rng.random() < float(weight) - whole else 0)
                for _ in range(max_pull):
                    item = next(it, _END)
                    if item is _END:
                        active.remove(entry)
                        break
                    if item is NOT_READY:
                        break
                    yielded = True
                    yield item
            if yielded:
                waiter.progress()
            elif active:
                yield NOT_READY  # nothing anywhere: the reader blocks on the waiter


_END = object()


class DuplicateState:
    """What the outputs of one ``duplicate`` share: the input, read once, and one queue of
    items per output."""

    def __init__(self, parent: LocalIterator[Any], n: int) -> None:
        self.parent = parent
        self.queues: list[collections.deque[Any]] = [collections.deque() for _ in range(n)]
        self.it: Iterator[Any] | None = None
        self.done = False


class DuplicateBase:
    """The base of output ``index`` of a ``duplicate``: its queue, refilled from the shared
    input only when every queue is empty (see `rlflow.flow.local.duplicate`)."""

    def __init__(self, state: DuplicateState, index: int, label: str) -> None:
        self.state = state
        self.index = index
        self.label = label

    def close(self) -> None:
        """Close the shared input; a sibling that reads on gets the input's ``PlanError``."""
        self.state.parent.close()
        self.state.it = None

    def __call__(self, env: BuildEnv) -> Iterator[Any]:
        state = self.state
        queue = state.queues[self.index]
        while True:
            if queue:
                yield queue.popleft()
                continue
            if state.done:
                return
            if any(state.queues):
                # Fairness: this output is ahead; let its siblings catch up first.
                env.waiter.sibling(self.label)
                yield NOT_READY
                continue
            if state.it is None:
                state.it = state.parent._build(env.timeout, env.waiter)
            item = next(state.it, _END)
            if item is _END:
                state.done = True
                return
            if item is NOT_READY:
                yield item
                continue
            for q in state.queues:
                q.append(item)

"""Merging and splitting local streams: ``union`` and ``duplicate``."""

from __future__ import annotations

import collections
import random
from collections.abc import Iterator, Sequence
from typing import Any

from rlflow.checks import check_int, check_number, check_type
from rlflow.errors import ConfigError
from rlflow.flow.graph import PlanNode
from rlflow.flow.local import LocalIterator
from rlflow.flow.metrics import SharedMetrics
from rlflow.flow.sentinels import NOT_READY
from rlflow.flow.stages import BuildEnv

_STAR_MAX_PULL = 100
"""How many items a ``"*"`` input may give in one pass (as in the original)."""

_LOCAL_ITERATOR = "a LocalIterator (gather a ParallelIterator first: gather_sync()/gather_async())"


class _UnionBase:
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


def union(
    iterators: Sequence[LocalIterator[Any]],
    *,
    deterministic: bool = False,
    round_robin_weights: Sequence[float | str] | None = None,
) -> LocalIterator[Any]:
    """Merge local iterators into one; lazy.

    Order: passes over the inputs in the given order; in each pass input i gives up to
    ``round_robin_weights[i]`` items (default 1; a fractional weight is rounded at random with a
    fixed seed; ``"*"`` = as many as are ready, at most 100). With ``deterministic=True`` every
    input blocks for its items, so the order is exact round robin. Otherwise inputs are polled:
    an input with nothing ready is skipped for this pass, and when a whole pass gives nothing the
    reader blocks on all pending futures at once (no busy polling). With weights, ``"*"`` inputs
    are polled and the others block. Ends when every input has ended.

    The inputs' contexts are merged into one fresh shared context, so counters written by any
    sub-flow are seen by all. ``close()`` on the union closes every input.

    >>> from rlflow.flow import from_iterable
    >>> a, b = from_iterable([1, 2, 3]), from_iterable([10, 20])
    >>> union([a, b], deterministic=True).take(10)
    [1, 10, 2, 20, 3]
    """
    children = list(iterators)
    for i, child in enumerate(children):
        check_type(child, f"union() input {i}", LocalIterator, _LOCAL_ITERATOR)
    if len(children) < 2:
        raise ConfigError(f"union() needs at least 2 iterators, got {len(children)}")
    if round_robin_weights is None:
        weights: list[float | str] = [1] * len(children)
        timeouts: list[float | None] = [None if deterministic else 0] * len(children)
    else:
        weights = list(round_robin_weights)
        if len(weights) != len(children):
            raise ConfigError(
                f"union(round_robin_weights={weights!r}) has {len(weights)} weights for "
                f"{len(children)} iterators; give one per iterator"
            )
        for i, w in enumerate(weights):
            if w != "*":
                label = f'union(round_robin_weights): weight {i} (a number > 0 or "*")'
                check_number(w, label, low=0, low_open=True)
        timeouts = [0 if w == "*" else None for w in weights]
    shared = SharedMetrics(parents=[c.shared_metrics for c in children])
    name = f"LocalUnion[{', '.join(c.name for c in children)}]"
    label = "union(deterministic)" if deterministic else "union(async)"
    if round_robin_weights is not None:
        label = f"union(weights={weights})"
    node = PlanNode("union", label, "union", tuple(c._node for c in children))
    base = _UnionBase(children, timeouts, weights)
    return LocalIterator(base, shared, name=name, node=node)


class _DuplicateState:
    def __init__(self, parent: LocalIterator[Any], n: int) -> None:
        self.parent = parent
        self.queues: list[collections.deque[Any]] = [collections.deque() for _ in range(n)]
        self.it: Iterator[Any] | None = None
        self.done = False


class _DuplicateBase:
    def __init__(self, state: _DuplicateState, index: int, label: str) -> None:
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


def duplicate(it: LocalIterator[Any], n: int) -> list[LocalIterator[Any]]:
    """Split one stream into ``n`` that each see every item, in order; lazy.

    Pulling an output whose buffer is empty pulls one item from the input into every output's
    buffer. Fairness bounds memory: an output that is ahead of a sibling (its buffer empty while
    a sibling's is not) gives ``NOT_READY`` instead of pulling, so read the outputs together
    (``union`` / ``concurrently``); reading only one of them raises :class:`PlanError` instead of
    hanging. All outputs share the input's context. Each output ends when the input has ended and
    its buffer is drained. ``close()`` on any output closes the input, so its siblings stop too.

    >>> from rlflow.flow import from_iterable
    >>> a, b = from_iterable([1, 2]).duplicate(2)
    >>> a.for_each(lambda x: ("a", x)).union(b, deterministic=True).take(10)
    [('a', 1), 1, ('a', 2), 2]
    """
    check_type(it, "duplicate(it)", LocalIterator, _LOCAL_ITERATOR)
    check_int(n, f"duplicate(n={n!r}): n", low=2)
    state = _DuplicateState(it, n)
    children: list[LocalIterator[Any]] = []
    for i in range(n):
        label = f"duplicate[{i}/{n}] of {it.name}"
        node = PlanNode("duplicate", f"duplicate[{i}/{n}]", "duplicate", (it._node,))
        children.append(
            LocalIterator(
                _DuplicateBase(state, i, label),
                it.shared_metrics,
                name=f"{it.name}.duplicate[{i}]",
                node=node,
            )
        )
    return children

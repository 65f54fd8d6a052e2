"""``LocalIterator``: a lazy, single-consumer chain of operators read in this process.

A LocalIterator is a *description* until first read: a base (a function ``env ->
iterator``) plus a tuple of stages. Each operator method returns a new LocalIterator with one
more stage; nothing runs until ``next()``. It is picklable until read (so it can be sent to an
actor), and must then be read by one consumer only. ``close()`` ends it and frees what the
gathers it was built from hold on their shard actors.

`union` (``flow.union``, ``LocalIterator.union``) merges local iterators and `duplicate`
(``LocalIterator.duplicate``) splits one; the bases they build on are in `rlflow.flow.merge`.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any, Generic, NamedTuple, TypeVar

from rlflow.checks import check_callable, check_int, check_number, check_type
from rlflow.errors import ConfigError, PlanError
from rlflow.flow import backend
from rlflow.flow import stages as st
from rlflow.flow.graph import PlanGraph, PlanNode
from rlflow.flow.merge import DuplicateBase, DuplicateState, UnionBase
from rlflow.flow.metrics import MetricsContext, SharedMetrics
from rlflow.flow.sentinels import NOT_READY
from rlflow.flow.waiting import Waiter

T = TypeVar("T")
U = TypeVar("U")

BaseFn = Callable[[st.BuildEnv], Iterator[Any]]
"""A base of a chain: ``env -> iterator``. With ``env.timeout=None`` it may block; with ``0`` it
must poll: yield NOT_READY and tell ``env.waiter`` why, instead of blocking."""


class ActorItem(NamedTuple):
    """An item paired with the actor that produced it (``zip_with_source_actor``)."""

    actor: Any
    item: Any


def closed_error(what: str) -> PlanError:
    """The error for reading ``what`` (an iterator, a gather) after ``close()``."""
    return PlanError(
        f"{what} was closed (close() freed what its reads held on the shard actors); build a "
        "new iterator to read again, e.g. gather the ParallelIterator again"
    )


class _IterableBase:
    """Base over a plain iterable (``from_iterable``)."""

    def __init__(self, iterable: Iterable[Any]) -> None:
        self.iterable = iterable

    def __call__(self, env: st.BuildEnv) -> Iterator[Any]:
        return iter(self.iterable)


class _ConcurrentForEach:
    """``for_each(fn, max_concurrency=k)``: ``fn`` runs as remote tasks, at most k in flight.

    Results are yielded as they finish; of those finished, the earliest submitted first
    (submission order locally).
    """

    def __init__(self, fn: Callable[[Any], Any], k: int, resources: dict[str, Any], label: str):
        self.fn, self.k, self.resources, self.label = fn, k, resources, label

    def __call__(self, upstream: Iterator[Any], env: st.BuildEnv) -> Iterator[Any]:
        task = backend.remote(self.fn, **self.resources)
        stats = env.ctx.stage(self.label)
        pending: list[Any] = []
        exhausted = False
        while not exhausted or pending:
            while not exhausted and (self.k == 0 or len(pending) < self.k):
                item = next(upstream, _END)
                if item is _END:
                    exhausted = True
                elif item is NOT_READY:
                    break
                else:
                    pending.append(task.remote(item))
            if not pending:
                if not exhausted:
                    yield NOT_READY
                continue
            ref = backend.first_ready(pending, env.timeout)  # the oldest finished task
            if ref is None:
                env.waiter.pending(pending)
                yield NOT_READY
                continue
            pending.remove(ref)
            try:
                result = backend.get(ref)
            except Exception as err:
                st.annotate(err, self.label, env)
                raise
            stats.items += 1
            yield result


_END = object()


class LocalIterator(Generic[T]):
    """A lazy, single-consumer iterator read in this process.

    Operator methods are lazy and return new iterators; reading (``next``, ``for``, ``take``)
    drives the chain. The top-level read never returns ``NOT_READY``: when no input has an item
    it blocks on the pending futures (no busy polling).
    """

    def __init__(
        self,
        base: BaseFn,
        shared_metrics: SharedMetrics,
        *,
        name: str,
        node: PlanNode,
        stages: tuple[Any, ...] = (),
        where: str = "driver",
    ) -> None:
        self._base = base
        self._stages = stages
        self.shared_metrics = shared_metrics
        self.name = name
        self._node = node
        self._where = where
        self._it: Iterator[Any] | None = None
        self._waiter: Waiter | None = None
        self._closed = False

    # ----------------------------------------------------------------- building and reading
    def _build(self, timeout: float | None, waiter: Waiter) -> Iterator[Any]:
        """Build a fresh chain from the base and stages (used by ``union`` and the first read)."""
        if self._closed:
            raise closed_error(repr(self))
        env = st.BuildEnv(self.shared_metrics.get(), timeout, waiter, self._where)
        it = self._base(env)
        for stage in self._stages:
            it = stage(it, env)
        return it

    def __iter__(self) -> LocalIterator[T]:
        return self

    def __next__(self) -> T:
        it = self._it
        if it is None:
            self._waiter = Waiter()
            it = self._it = self._build(None, self._waiter)
        while True:
            item = next(it)
            if item is not NOT_READY:
                return item  # type: ignore[no-any-return]
            assert self._waiter is not None
            self._waiter.block()

    def close(self) -> None:
        """Stop reading and free what this iterator's reads hold on the shard actors.

        Eager and idempotent; it never blocks and never raises, even when an actor is dead or the
        backend was shut down. It closes the read of every gather this iterator was built from,
        following ``union`` and ``duplicate`` inputs recursively: each shard actor is sent
        ``par_iter_close`` (without waiting) and forgets that read's chain. Iterators that share
        those gathers stop too (``g`` and ``g.for_each(f)``; the outputs of one ``duplicate``).
        Reading a closed iterator raises :class:`PlanError`. A gather's read is also closed when
        the chain reading it is dropped; call this to free them at a known time (a trainer does
        when it stops).

        >>> from rlflow import flow
        >>> flow.init(backend="local")
        >>> it = flow.from_range(4, num_shards=2).gather_sync()
        >>> it.take(2)
        [0, 2]
        >>> it.close()
        >>> it.take(1)
        Traceback (most recent call last):
        ...
        rlflow.errors.PlanError: LocalIterator[from_range[4, shards=2].gather_sync()] was closed...
        """
        if self._closed:
            return
        self._closed = True
        self._it = self._waiter = None  # drops the built chain: its generators end here
        close_base = getattr(self._base, "close", None)
        if close_base is not None:
            close_base()

    def __getstate__(self) -> dict[str, Any]:
        if self._it is not None:
            raise PlanError(f"{self!r} has been read already; only an unread iterator can be sent")
        return self.__dict__.copy()

    def __repr__(self) -> str:
        return f"LocalIterator[{self.name}]"

    @property
    def metrics(self) -> MetricsContext:
        """The plan's shared context (counters, timers, info, stage stats), readable anytime."""
        return self.shared_metrics.get()

    def describe(self) -> PlanGraph:
        """The operator graph that ends here; ``str()`` / ``.to_mermaid()`` renders it."""
        return PlanGraph.ending_at(self._node)

    # ------------------------------------------------------------------------ chaining
    def _then(self, stage: Any, suffix: str, node: PlanNode) -> LocalIterator[Any]:
        return LocalIterator(
            self._base,
            self.shared_metrics,
            name=self.name + suffix,
            node=node,
            stages=(*self._stages, stage),
            where=self._where,
        )

    def _stage_node(self, op: str, arg: str = "") -> PlanNode:
        return PlanNode(op, f"{op}({arg})", "stage", (self._node,))

    def for_each(
        self,
        fn: Callable[[T], U],
        max_concurrency: int = 1,
        resources: dict[str, Any] | None = None,
    ) -> LocalIterator[U]:
        """Map: ``fn(item)`` for each item, lazily, in input order; here, in the reader.

        If ``fn`` returns ``NOT_READY`` it is called again with the same item on a later pull
        (non-blocking functions, e.g. ``Enqueue``). If ``fn`` has a method ``_on_fetch_start``,
        it is called before each new item is pulled from upstream. With ``max_concurrency`` k > 1
        (0: unbounded), ``fn`` runs as remote tasks with ``resources`` (Ray task options), at
        most k in flight, and results come in completion order.
        """
        check_callable(fn, "for_each takes a callable: fn")
        check_int(max_concurrency, "for_each(max_concurrency)", low=0)
        node = self._stage_node("for_each", st.fn_name(fn))
        stage: Any
        if max_concurrency == 1:
            stage = st.ForEach(fn, node.key)
        else:
            stage = _ConcurrentForEach(fn, max_concurrency, dict(resources or {}), node.key)
        return self._then(stage, ".for_each()", node)

    def filter(self, fn: Callable[[T], Any]) -> LocalIterator[T]:
        """Keep the items for which ``fn(item)`` is truthy; lazy, order kept."""
        check_callable(fn, "filter takes a callable: fn")
        node = self._stage_node("filter", st.fn_name(fn))
        return self._then(st.Filter(fn, node.key), ".filter()", node)

    def batch(self, n: int) -> LocalIterator[list[T]]:
        """Lists of ``n`` consecutive items; a shorter final list when the input ends."""
        check_int(n, "batch(n)", low=1)
        node = self._stage_node("batch", str(n))
        return self._then(st.Batch(n, node.key), f".batch({n})", node)

    def flatten(self) -> LocalIterator[Any]:
        """Each item is an iterable; yield its elements in order."""
        node = self._stage_node("flatten")
        return self._then(st.Flatten(node.key), ".flatten()", node)

    def combine(self, fn: Callable[[T], Iterable[U]]) -> LocalIterator[U]:
        """Flat-map: ``fn(item)`` returns a list of outputs (possibly empty); same as
        ``for_each(fn).flatten()``."""
        check_callable(fn, "combine takes a callable: fn")
        node = self._stage_node("combine", st.fn_name(fn))
        return self._then(st.Combine(fn, node.key), ".combine()", node)

    def transform(self, fn: Callable[[Iterator[T]], Iterable[U]]) -> LocalIterator[U]:
        """Whole-stream transform: ``fn(iterator) -> iterator``, called once when the chain is
        built. ``fn`` must pass ``NOT_READY`` items through unchanged."""
        check_callable(fn, "transform takes a callable: fn")
        node = self._stage_node("transform", st.fn_name(fn))
        return self._then(st.Transform(fn, node.key), ".transform()", node)

    def shuffle(self, shuffle_buffer_size: int, seed: int | None = None) -> LocalIterator[T]:
        """Reservoir shuffle: fill a buffer of ``shuffle_buffer_size`` items, then emit a random
        buffered item per new input; drain in random order at the end. Size 1 = identity."""
        check_int(shuffle_buffer_size, "shuffle(shuffle_buffer_size)", low=1)
        node = self._stage_node("shuffle", str(shuffle_buffer_size))
        stage = st.Shuffle(shuffle_buffer_size, seed, node.key)
        return self._then(stage, f".shuffle({shuffle_buffer_size})", node)

    def zip_with_source_actor(self) -> LocalIterator[ActorItem]:
        """Pair each item with ``current_metrics().current_actor`` as an :class:`ActorItem`.

        Only meaningful after ``gather_async`` or ``get_shard``, which set the current actor;
        elsewhere the first item raises :class:`PlanError`.
        """
        name = self.name

        def with_actor(item: Any) -> ActorItem:
            from rlflow.flow.metrics import current_metrics

            actor = current_metrics().current_actor
            if actor is None:
                raise PlanError(
                    f"zip_with_source_actor() on {name}: no source actor is known; use it after "
                    "gather_async() or get_shard()"
                )
            return ActorItem(actor, item)

        node = PlanNode("zip_with_source_actor", "zip_with_source_actor()", "stage", (self._node,))
        return self._then(st.ForEach(with_actor, node.key), ".zip_with_source_actor()", node)

    def take(self, n: int) -> list[T]:
        """Read up to ``n`` items (eager)."""
        check_int(n, f"take(n={n!r}): n", low=0)
        return list(itertools.islice(self, n))

    def show(self, n: int = 20, file: IO[str] | None = None) -> None:
        """Read up to ``n`` items and print each on its own line (to ``file``, default stdout)."""
        out = file if file is not None else sys.stdout
        for item in self.take(n):
            out.write(f"{item}\n")

    # ----------------------------------------------------------------- merging
    def union(
        self,
        *others: LocalIterator[Any],
        deterministic: bool = False,
        round_robin_weights: list[float | str] | None = None,
    ) -> LocalIterator[Any]:
        """Merge this iterator with ``others``; see :func:`union`."""
        return union(
            [self, *others], deterministic=deterministic, round_robin_weights=round_robin_weights
        )

    def duplicate(self, n: int) -> list[LocalIterator[T]]:
        """``n`` iterators that each see every item; see :func:`duplicate`."""
        return duplicate(self, n)


def from_iterable(iterable: Iterable[T], name: str | None = None) -> LocalIterator[T]:
    """A LocalIterator over a plain iterable, read in this process; no actors.

    >>> from_iterable([1, 2, 3]).for_each(lambda x: x * 10).take(5)
    [10, 20, 30]
    """
    label = name or f"from_iterable[{type(iterable).__name__}]"
    node = PlanNode("from_iterable", label, "source")
    return LocalIterator(_IterableBase(iterable), SharedMetrics(), name=label, node=node)


_LOCAL_ITERATOR = "a LocalIterator (gather a ParallelIterator first: gather_sync()/gather_async())"


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
    base = UnionBase(children, timeouts, weights)
    return LocalIterator(base, shared, name=name, node=node)


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
    state = DuplicateState(it, n)
    children: list[LocalIterator[Any]] = []
    for i in range(n):
        label = f"duplicate[{i}/{n}] of {it.name}"
        node = PlanNode("duplicate", f"duplicate[{i}/{n}]", "duplicate", (it._node,))
        children.append(
            LocalIterator(
                DuplicateBase(state, i, label),
                it.shared_metrics,
                name=f"{it.name}.duplicate[{i}]",
                node=node,
            )
        )
    return children

"""``ParallelIterator``: a stream sharded over actors, and the functions that create one.

A ParallelIterator is an immutable description: a list of shards (actor handle + the
transforms to run there). Transforms run on the shard actors, lazily, per shard, in order; each
shard gets its own copy of a stateful function. Reading happens only through a gather
(``gather_sync``, ``gather_async``, ``batch_across_shards``) or a shard iterator (``get_shard``),
which return :class:`LocalIterator` objects (the gathers themselves live in ``gather.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any, Generic, TypeVar

from rlflow.checks import check_bool, check_callable, check_int, check_number, check_type
from rlflow.errors import ConfigError, PlanError
from rlflow.flow import backend
from rlflow.flow.gather import AsyncGather, Shard, SliceSource, new_read_key
from rlflow.flow.graph import PlanGraph, PlanNode
from rlflow.flow.local import LocalIterator
from rlflow.flow.metrics import SharedMetrics
from rlflow.flow.recovery import ShardRecovery
from rlflow.flow.rounds import DeadlineGather, SyncGather
from rlflow.flow.stages import fn_name
from rlflow.flow.worker import ParallelIteratorWorker, ShardOp

__all__ = [
    "ParallelIterator",
    "Shard",
    "ShardRecovery",
    "from_actors",
    "from_items",
    "from_iterators",
    "from_range",
    "new_read_key",
]

T = TypeVar("T")
U = TypeVar("U")


class ParallelIterator(Generic[T]):
    """A stream sharded over actors; transforms run on the shards, lazily.

    Create one with :func:`from_items`, :func:`from_range`, :func:`from_iterators` or
    :func:`from_actors`. It is a picklable description and can be sent to another actor or task
    and read there.
    """

    def __init__(
        self,
        shards: Sequence[Shard],
        *,
        name: str,
        node: PlanNode,
        parents: Sequence[ParallelIterator[Any]] = (),
        union_parts: int = 1,
    ) -> None:
        self._shards = tuple(shards)
        self.name = name
        self._node = node
        self._parents = tuple(parents)  # keeps actors created for parents alive
        self._union_parts = union_parts

    def __repr__(self) -> str:
        return f"ParallelIterator[{self.name}]"

    def __iter__(self) -> Iterator[T]:
        raise PlanError(
            f"{self!r} cannot be iterated directly: read it through gather_sync(), "
            "gather_async(), batch_across_shards() or get_shard(i)"
        )

    def describe(self) -> PlanGraph:
        """The operator graph that ends here."""
        return PlanGraph.ending_at(self._node)

    # --------------------------------------------------------------- shard-side transforms
    def _with(self, op: ShardOp, suffix: str, label: str) -> ParallelIterator[Any]:
        node = PlanNode(op.method, label, "shard_stage", (self._node,))
        shards = [s._replace(transforms=(*s.transforms, op)) for s in self._shards]
        return ParallelIterator(
            shards,
            name=self.name + suffix,
            node=node,
            parents=(self,),
            union_parts=self._union_parts,
        )

    def for_each(
        self,
        fn: Callable[[T], U],
        max_concurrency: int = 1,
        resources: dict[str, Any] | None = None,
    ) -> ParallelIterator[U]:
        """Map ``fn`` over each shard, on the shard actors; per-shard order kept.

        With ``max_concurrency`` k > 1 (0: unbounded) ``fn`` runs as remote tasks started from
        the shard, at most k in flight per shard, with Ray task options ``resources``; results
        then come in completion order.
        """
        check_callable(fn, "for_each takes a callable: fn")
        check_int(max_concurrency, "for_each(max_concurrency)", low=0)
        op = ShardOp(
            "for_each", (fn,), {"max_concurrency": max_concurrency, "resources": resources}
        )
        return self._with(op, ".for_each()", f"for_each({fn_name(fn)})")

    def filter(self, fn: Callable[[T], Any]) -> ParallelIterator[T]:
        """Keep items where ``fn(item)`` is truthy, on the shards."""
        check_callable(fn, "filter takes a callable: fn")
        return self._with(ShardOp("filter", (fn,), {}), ".filter()", f"filter({fn_name(fn)})")

    def batch(self, n: int) -> ParallelIterator[list[T]]:
        """Lists of ``n`` consecutive items of the same shard; a shorter last one at the end."""
        check_int(n, "batch(n)", low=1)
        return self._with(ShardOp("batch", (n,), {}), f".batch({n})", f"batch({n})")

    def flatten(self) -> ParallelIterator[Any]:
        """Expand list items into their elements, on the shards."""
        return self._with(ShardOp("flatten", (), {}), ".flatten()", "flatten()")

    def combine(self, fn: Callable[[T], Iterable[U]]) -> ParallelIterator[U]:
        """Flat-map on the shards: ``for_each(fn).flatten()``."""
        check_callable(fn, "combine takes a callable: fn")
        return self._with(ShardOp("combine", (fn,), {}), ".combine()", f"combine({fn_name(fn)})")

    def transform(self, fn: Callable[[Iterator[T]], Iterable[U]]) -> ParallelIterator[U]:
        """Whole-stream transform ``fn(iterator) -> iterator``, once per shard; ``fn`` must
        pass ``NOT_READY`` through."""
        check_callable(fn, "transform takes a callable: fn")
        label = f"transform({fn_name(fn)})"
        return self._with(ShardOp("transform", (fn,), {}), ".transform()", label)

    def local_shuffle(
        self, shuffle_buffer_size: int, seed: int | None = None
    ) -> ParallelIterator[T]:
        """Per-shard reservoir shuffle (items never leave their shard); size 1 = identity.

        With a ``seed`` each shard's order is reproducible."""
        check_int(shuffle_buffer_size, "local_shuffle(shuffle_buffer_size)", low=1)
        op = ShardOp("shuffle", (shuffle_buffer_size,), {"seed": seed})
        suffix = f".local_shuffle({shuffle_buffer_size})"
        return self._with(op, suffix, f"local_shuffle({shuffle_buffer_size})")

    # ----------------------------------------------------------------- restructuring
    def repartition(self, num_partitions: int, batch_ms: float = 0) -> ParallelIterator[T]:
        """A new iterator over ``num_partitions`` new actors (eager: they are created now).

        The j-th item of each old shard goes to partition ``j % num_partitions``; partition p
        reads the old shards round robin. Deterministic for deterministic sources.
        ``batch_ms`` is accepted for compatibility with the original and must be >= 0.
        """
        check_int(num_partitions, "repartition(num_partitions)", low=1)
        check_number(batch_ms, "repartition(batch_ms)", low=0)
        key = new_read_key()
        worker = backend.remote(ParallelIteratorWorker).options(num_cpus=0)
        name = f"{self.name}.repartition[num_partitions={num_partitions}]"
        shards = [
            Shard(
                worker.remote(SliceSource(self._shards, key, num_partitions, p), repeat=False),
                (),
                f"partition {p} of {name}",
            )
            for p in range(num_partitions)
        ]
        node = PlanNode(
            "repartition", f"repartition({num_partitions})", "shard_stage", (self._node,)
        )
        return ParallelIterator(shards, name=name, node=node, parents=(self,))

    def union(self, other: ParallelIterator[Any]) -> ParallelIterator[Any]:
        """Concatenate the shards of ``self`` and ``other``; shard count adds up."""
        check_type(other, "ParallelIterator.union(other)", ParallelIterator, "a ParallelIterator")
        node = PlanNode("union", "ParallelUnion", "union", (self._node, other._node))
        return ParallelIterator(
            self._shards + other._shards,
            name=f"ParallelUnion[{self.name}, {other.name}]",
            node=node,
            parents=(self, other),
            union_parts=self._union_parts + other._union_parts,
        )

    def select_shards(self, shards_to_keep: Sequence[int]) -> ParallelIterator[T]:
        """A sub-iterator over the given shard indexes (the caller keeps them disjoint)."""
        if self._union_parts > 1:
            raise ConfigError("select_shards() is not supported after a ParallelIterator union()")
        keep = list(shards_to_keep)
        if not keep:
            raise ConfigError("select_shards() needs at least one shard index, got []")
        for i in keep:
            if not 0 <= check_int(i, "select_shards(): shard index") < len(self._shards):
                raise ConfigError(
                    f"select_shards(): shard index {i!r} is out of range [0, {len(self._shards)})"
                )
        node = PlanNode("select_shards", f"select_shards({keep})", "shard_stage", (self._node,))
        return ParallelIterator(
            [self._shards[i] for i in keep],
            name=f"{self.name}.select_shards({len(keep)} total)",
            node=node,
            parents=(self,),
        )

    # ----------------------------------------------------------------- introspection
    def num_shards(self) -> int:
        """How many shards (actors) this iterator reads."""
        return len(self._shards)

    def actors(self) -> list[Any]:
        """The shard actors' handles, in shard order."""
        return [s.actor for s in self._shards]

    def shards(self) -> list[LocalIterator[T]]:
        """One LocalIterator per shard (``get_shard(i)`` for each i)."""
        return [self.get_shard(i) for i in range(len(self._shards))]

    def get_shard(
        self, shard_index: int, batch_ms: float = 0, num_async: int = 1
    ) -> LocalIterator[T]:
        """A LocalIterator over one shard, ``num_async`` requests in flight; it sets
        ``current_actor``. Serializable until read, so it can be read in another actor."""
        if not 0 <= check_int(shard_index, "get_shard(shard_index)") < len(self._shards):
            raise ConfigError(
                f"get_shard({shard_index!r}): shard index out of range [0, {len(self._shards)})"
            )
        check_int(num_async, "get_shard(num_async)", low=1)
        check_number(batch_ms, "get_shard(batch_ms)", low=0)
        node = PlanNode("get_shard", f"get_shard({shard_index})", "gather", (self._node,))
        name = f"{self.name}.shard[{shard_index}]"
        base = AsyncGather([self._shards[shard_index]], num_async, batch_ms, node.key, name)
        return LocalIterator(base, SharedMetrics(), name=name, node=node)

    # ----------------------------------------------------------------- gathering
    def batch_across_shards(
        self,
        *,
        timeout_s: float | None = None,
        on_late: Callable[[int], Any] | None = None,
        ahead: bool = False,
    ) -> LocalIterator[list[T]]:
        """The synchronous barrier: each round asks every active shard for one item and yields
        the replies as one list, in shard order. At most one request per shard in flight; the
        next round starts when the reader pulls again. Ended shards drop out (a round can be
        shorter); ends when all shards have ended.

        With ``timeout_s`` (seconds, > 0) a round closes once that long has passed with at
        least one reply: a shard still out keeps its request in flight, its reply goes into a
        later round (never dropped, never asked twice), and ``on_late(n)`` is called with the
        number of requests the round closed without (see ``rounds.DeadlineGather``). With
        ``ahead=True`` the next round is asked for as soon as a round is fetched, before the
        reader gets it (one request per shard in flight while the reader works).

        Each read builds the shards' chains afresh on the actors; ``close()`` on the returned
        iterator (or dropping it) frees them there. The same holds for every gather below.
        """
        node = PlanNode("batch_across_shards", "batch_across_shards()", "gather", (self._node,))
        name = f"{self.name}.batch_across_shards()"
        check_bool(ahead, "batch_across_shards(ahead)")
        base: SyncGather | DeadlineGather = SyncGather(self._shards, node.key, name)
        if timeout_s is not None:
            check_number(timeout_s, "batch_across_shards(timeout_s)", low=0, low_open=True)
        if timeout_s is not None or ahead:
            base = DeadlineGather(self._shards, timeout_s, on_late, node.key, name, ahead=ahead)
        return LocalIterator(base, SharedMetrics(), name=name, node=node)

    def gather_sync(self) -> LocalIterator[T]:
        """Deterministic round robin over the shards: ``batch_across_shards().flatten()``.

        Order: shard0 item0, shard1 item0, shard0 item1, ...; ended shards drop out."""
        batches = self.batch_across_shards()
        flat = batches.flatten()
        flat.name = f"{self.name}.gather_sync()"
        return flat

    def gather_async(self, batch_ms: float = 0, num_async: int = 1) -> LocalIterator[T]:
        """Items from whichever shard has one ready; lazy; sets ``current_actor`` per item.

        Keeps ``num_async`` requests in flight per shard, re-issuing a shard's request before its
        items go downstream. Of the replies ready at a read, the oldest request's comes first, so
        a shard that answers at once cannot starve a slower one. Order across shards is not
        otherwise defined; within a shard it is kept when ``num_async == 1``. With ``batch_ms``
        > 0 each request returns the items a shard produced within that many milliseconds. Ends
        when all shards have ended.
        """
        check_int(num_async, "gather_async(num_async)", low=1)
        check_number(batch_ms, "gather_async(batch_ms)", low=0)
        label = f"gather_async(num_async={num_async})"
        node = PlanNode("gather_async", label, "gather", (self._node,))
        name = f"{self.name}.gather_async()"
        base = AsyncGather(self._shards, num_async, batch_ms, node.key, name)
        return LocalIterator(base, SharedMetrics(), name=name, node=node)

    def take(self, n: int) -> list[T]:
        """The first ``n`` items of ``gather_sync()`` (eager)."""
        return self.gather_sync().take(n)

    def show(self, n: int = 20, file: IO[str] | None = None) -> None:
        """Print the first ``n`` items of ``gather_sync()``, one per line."""
        self.gather_sync().show(n, file=file if file is not None else sys.stdout)


def _source_actors(sources: Sequence[Any], *, repeat: bool) -> list[Any]:
    worker = backend.remote(ParallelIteratorWorker).options(num_cpus=0)
    return [worker.remote(source, repeat=repeat) for source in sources]


def _make(
    actors: Sequence[Any], name: str, recovery: ShardRecovery | None = None
) -> ParallelIterator[Any]:
    node = PlanNode("source", name, "source")
    shards = [Shard(a, (), f"shard {i} of {name}", i, recovery) for i, a in enumerate(actors)]
    return ParallelIterator(shards, name=name, node=node)


def from_items(
    items: Sequence[T], num_shards: int = 2, *, repeat: bool = False
) -> ParallelIterator[T]:
    """Shard a list over ``num_shards`` new actors: item i goes to shard ``i % num_shards``.

    >>> from rlflow import flow
    >>> flow.init(backend="local")
    >>> from_items([1, 2, 3, 4], num_shards=2).gather_sync().take(4)
    [1, 2, 3, 4]
    """
    check_int(num_shards, "from_items(num_shards)", low=1)
    items = list(items)
    parts = [items[i::num_shards] for i in range(num_shards)]
    kind = type(items[0]).__name__ if items else "empty"
    name = (
        f"from_items[{kind}, {len(items)}, shards={num_shards}{', repeat=True' if repeat else ''}]"
    )
    return _make(_source_actors(parts, repeat=repeat), name)


def from_range(n: int, num_shards: int = 2, *, repeat: bool = False) -> ParallelIterator[int]:
    """``range(n)`` split into ``num_shards`` contiguous parts on new actors; the last shard
    takes the remainder.

    >>> from rlflow import flow
    >>> flow.init(backend="local")
    >>> from_range(5, num_shards=2).batch_across_shards().take(3)
    [[0, 2], [1, 3], [4]]
    """
    check_int(n, "from_range(n)", low=0)
    check_int(num_shards, "from_range(num_shards)", low=1)
    size = n // num_shards
    parts = [
        range(i * size, n if i == num_shards - 1 else (i + 1) * size) for i in range(num_shards)
    ]
    name = f"from_range[{n}, shards={num_shards}{', repeat=True' if repeat else ''}]"
    return _make(_source_actors(parts, repeat=repeat), name)


def from_iterators(
    generators: Sequence[Iterable[T] | Callable[[], Iterable[T]]],
    *,
    repeat: bool = False,
    name: str | None = None,
) -> ParallelIterator[T]:
    """One new actor per iterable (or zero-argument callable returning one)."""
    generators = list(generators)
    if not generators:
        raise ConfigError("from_iterators() needs at least one iterable, got []")
    return _make(
        _source_actors(generators, repeat=repeat),
        name or f"from_iterators[shards={len(generators)}]",
    )


def from_actors(
    actors: Sequence[Any], name: str | None = None, *, recovery: ShardRecovery | None = None
) -> ParallelIterator[Any]:
    """Wrap existing actors whose class subclasses :class:`ParallelIteratorWorker`; no new
    actors are created.

    With a ``recovery``, a gather whose shard's actor dies asks ``recovery.replace(i,
    dead_actor, error)`` (``i``: the actor's position in ``actors``) for a new actor and reads it
    in the dead one's place, or goes on without that shard (see ``rlflow.flow.recovery``);
    without one, the death ends the read with :class:`~rlflow.errors.ActorDiedError`. The
    replacement is a gather's own: ``actors()`` still lists the actors given here.

    >>> from rlflow import flow
    >>> flow.init(backend="local")
    >>> source = flow.from_range(4, num_shards=1, repeat=True)
    >>> spare = flow.from_range(4, num_shards=1, repeat=True).actors()[0]
    >>> pit = from_actors(source.actors(), recovery=ShardRecovery(lambda i, dead, err: spare))
    >>> it = pit.gather_sync()
    >>> it.take(2)
    [0, 1]
    >>> flow.kill(source.actors()[0])
    >>> it.take(2)  # the spare starts its own stream
    [0, 1]
    """
    actors = list(actors)
    if not actors:
        raise ConfigError("from_actors() needs at least one actor, got []")
    if recovery is not None:
        check_type(recovery, "from_actors(recovery)", ShardRecovery, "a ShardRecovery")
        check_callable(recovery.replace, "from_actors(recovery): ShardRecovery.replace")
        check_int(recovery.retry_every, "from_actors(recovery): ShardRecovery.retry_every", low=1)
    return _make(actors, name or f"from_actors[shards={len(actors)}]", recovery)

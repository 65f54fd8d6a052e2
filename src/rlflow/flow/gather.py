"""Reading a :class:`~rlflow.flow.ParallelIterator`: shards, reads, and the gathers.

A *read* is one pass of one gather over a set of shards. It has a random key; each shard's actor
builds the shard's chain for that key on ``par_iter_init`` and keeps it until ``par_iter_close``.
A :class:`Read` is closed when its gather is closed (``LocalIterator.close()``) or when the chain
that reads it is dropped (a ``weakref.finalize``), so an actor never keeps the state of a gather
nobody reads.

The gathers are the bases (``env -> iterator``) of the local iterators that ``gather_sync``,
``gather_async``, ``batch_across_shards`` and ``get_shard`` return. A shard whose actor dies is
replaced or left out when it has a :class:`~rlflow.flow.recovery.ShardRecovery` (see
``recovery.py``); without one its death ends the read.
"""

from __future__ import annotations

import functools
import time
import uuid
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from rlflow.errors import ActorDiedError, PlanError
from rlflow.flow import backend
from rlflow.flow.local import closed_error
from rlflow.flow.recovery import ShardRecovery, ShardSlots
from rlflow.flow.sentinels import NOT_READY, SHARD_END
from rlflow.flow.stages import BuildEnv, annotate
from rlflow.flow.worker import ShardOp

_perf = time.perf_counter


class Shard(NamedTuple):
    """One shard: the actor, the transforms to run on it, and its place for messages."""

    actor: Any
    transforms: tuple[ShardOp, ...]
    where: str
    source_index: int = 0
    """Its position among the actors of the source that made it (``from_actors``)."""
    recovery: ShardRecovery | None = None
    """What a gather does when the actor dies (None: the read ends with the error)."""


def new_read_key() -> int:
    """A random id for one read of shards (an int: Ray serializes small ints fastest)."""
    return uuid.uuid4().int >> 66


def _fetch(ref: Any, shard: Shard, label: str, env: BuildEnv) -> Any:
    """``get`` one reply, naming the stage and the shard in any error."""
    try:
        return backend.get(ref)
    except Exception as err:
        annotate(err, label, BuildEnv(env.ctx, env.timeout, env.waiter, shard.where))
        raise


def _forget_read(actors: list[Any], key: int) -> None:
    for actor in actors:
        backend.send_and_forget(actor, "par_iter_close", key)


class Read:
    """One open read of a set of shards, keyed by :attr:`key` on each shard's actor.

    Closed by :meth:`close` or, at the latest, when this object is garbage collected: either way
    ``par_iter_close(key)`` goes to every shard's actor once, without waiting for replies.
    """

    __slots__ = ("__weakref__", "_actors", "_finalizer", "_next", "closed", "key", "name")

    def __init__(self, shards: Sequence[Shard], name: str) -> None:
        self.key = new_read_key()
        self.name = name
        self.closed = False
        self._actors = [s.actor for s in shards]
        self._next: dict[int, Any] = {}  # id(actor) -> its zero-argument "next item" call
        self._finalizer = weakref.finalize(self, _forget_read, self._actors, self.key)
        # At interpreter exit the actors go with the driver (or Ray is already down).
        self._finalizer.atexit = False

    def open(self, shards: Sequence[Shard], label: str, env: BuildEnv) -> dict[int, Any]:
        """Build the chain for this read on every shard (blocks until all have replied).

        Returns ``{position: ActorDiedError}`` for the shards with a recovery whose actor is
        dead; a dead actor of a shard without one raises.
        """
        key = self.key
        refs = [
            s.actor.par_iter_init.remote(key, backend.ship(list(s.transforms)), s.where)
            for s in shards
        ]
        dead = {}
        for pos, (ref, shard) in enumerate(zip(refs, shards, strict=True)):
            try:
                slot = _fetch(ref, shard, label, env)
            except ActorDiedError as err:
                if shard.recovery is None:
                    raise
                dead[pos] = err
                continue
            actor = shard.actor
            self._next[id(actor)] = (
                functools.partial(actor.par_iter_next.remote, key)
                if slot is None
                else getattr(actor, f"par_iter_next_{slot}").remote
            )
        return dead

    def request(self, shard: Shard) -> Any:
        """Ask ``shard`` (open in this read) for its next item: ``par_iter_next`` by the read's
        slot on the actor, or by key when it got none (see ``flow/worker.py``)."""
        return self._next[id(shard.actor)]()

    def swap_actor(self, old: Any, new: Any) -> None:
        """Read ``new`` in place of ``old`` (a dead actor): closing frees ``new``'s chain."""
        self._actors[:] = [new if a is old else a for a in self._actors]

    def close(self) -> None:
        """Free this read on the shard actors now (idempotent; never raises, never waits)."""
        self.closed = True
        self._finalizer()

    def closed_error(self) -> PlanError:
        """The error for a pull from this read after it was closed."""
        return closed_error(f"gather {self.name}")


class GatherBase:
    """What every gather shares: its shards, its name, and the reads it has open.

    Each build of a chain over this base opens a new :class:`Read`. The base keeps only weak
    references to them, so dropping a chain closes its read; :meth:`close` closes them all and
    refuses new ones.
    """

    def __init__(self, shards: Sequence[Shard], label: str, name: str) -> None:
        self.shards = list(shards)
        self.label = label
        self.name = name
        self.closed = False
        self._reads: weakref.WeakSet[Read] = weakref.WeakSet()

    def open_read(self, env: BuildEnv) -> tuple[Read, ShardSlots]:
        """A new read over this base's shards, built on every shard actor, and its slots (dead
        actors already replaced or left out)."""
        if self.closed:
            raise closed_error(f"gather {self.name}")
        read = Read(self.shards, self.name)
        self._reads.add(read)
        dead = read.open(self.shards, self.label, env)
        slots = ShardSlots(self, read, env)
        for pos, err in dead.items():
            slots.died(pos, err)
        return read, slots

    def close(self) -> None:
        """Close every open read of this gather, and refuse new ones."""
        self.closed = True
        for read in list(self._reads):
            read.close()

    def __getstate__(self) -> dict[str, Any]:
        # Open reads belong to this process; a copy sent elsewhere opens its own.
        state = self.__dict__.copy()
        del state["_reads"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reads = weakref.WeakSet()


class AsyncGather(GatherBase):
    """``gather_async``: ``num_async`` requests in flight per shard; items as they arrive, the
    oldest ready reply first (so a shard that answers at once cannot starve a slower one).

    A shard whose actor died loses its requests in flight; its replacement gets new ones.
    """

    def __init__(
        self, shards: Sequence[Shard], num_async: int, batch_ms: float, label: str, name: str
    ) -> None:
        super().__init__(shards, label, name)
        self.num_async = num_async
        self.batch_ms = batch_ms

    def _request(self, shard: Shard, read: Read) -> Any:
        # Without batching a request returns the bare item (Ray's fast path for arrays);
        # with batching it returns a ShardReply.
        if self.batch_ms > 0:
            return shard.actor.par_iter_next_batch.remote(read.key, self.batch_ms)
        return read.request(shard)

    def _issue(
        self, pending: dict[Any, int], slots: ShardSlots, positions: list[int], read: Read
    ) -> None:
        """``num_async`` requests to each shard at ``positions``, round robin over them."""
        for _ in range(self.num_async):
            for pos in positions:
                pending[self._request(slots.live[pos], read)] = pos

    def __call__(self, env: BuildEnv) -> Iterator[Any]:
        read, slots = self.open_read(env)
        ctx = env.ctx
        stats = ctx.stage(self.label)
        pending: dict[Any, int] = {}  # request -> shard position
        self._issue(pending, slots, list(slots.live), read)
        while pending or slots.left_out:
            if read.closed:
                raise read.closed_error()
            if not pending:  # no live shard: the left-out ones come back, or this raises
                self._issue(pending, slots, slots.revive_or_raise(), read)
            start = _perf()
            ref = backend.first_ready(pending, env.timeout)  # the oldest reply: no shard starves
            stats.wait_time_s += _perf() - start
            if ref is None:
                env.waiter.pending(pending)
                yield NOT_READY
                continue
            pos = pending.pop(ref)
            actor = slots.live[pos].actor
            items = self._reply(ref, pos, pending, slots, read)
            for item in items:
                ctx.current_actor = actor
                stats.items += 1
                yield item
            self._issue(pending, slots, slots.count(len(items)), read)

    def _reply(
        self, ref: Any, pos: int, pending: dict[Any, int], slots: ShardSlots, read: Read
    ) -> Sequence[Any]:
        """The items of the reply ``ref`` from the shard at ``pos``; its next request goes out
        before ``ref`` is fetched (the actor works while the reply travels). A dead actor's
        other requests are dropped; its replacement (if any) gets ``num_async`` new ones."""
        shard = slots.live[pos]
        ahead = self._request(shard, read)
        pending[ahead] = pos
        try:
            reply = _fetch(ref, shard, self.label, slots.env)
        except ActorDiedError as err:
            for dropped in [r for r, p in pending.items() if p == pos]:
                del pending[dropped]
            if slots.died(pos, err) is not None:
                self._issue(pending, slots, [pos], read)
            return ()
        if self.batch_ms > 0:
            items, done = reply
        elif reply is SHARD_END:
            items, done = (), True
        else:
            items, done = (reply,), False
        if done:
            del pending[ahead]  # it will answer "ended" too
            if pos not in pending.values():
                del slots.live[pos]  # its last request answered: the shard has ended
        return items  # type: ignore[no-any-return]


class SliceSource:
    """The item source of a repartitioned shard: positions ``start (mod step)`` of every old
    shard, round robin over the old shards.

    Every partition reads the old shards under one shared ``key``, which stays open on them for
    as long as they live: no single partition knows when the others are done with it.
    """

    def __init__(self, shards: Sequence[Shard], key: int, step: int, start: int) -> None:
        self.shards = list(shards)
        self.key = key
        self.step = step
        self.start = start

    def __call__(self) -> Iterator[Any]:
        for shard in self.shards:
            backend.get(
                shard.actor.par_iter_init.remote(
                    self.key, backend.ship(list(shard.transforms)), shard.where, slot=False
                )
            )
        active = list(self.shards)
        while active:
            refs = [s.actor.par_iter_slice.remote(self.key, self.step, self.start) for s in active]
            values = backend.get(refs)
            active = [s for s, v in zip(active, values, strict=True) if v is not SHARD_END]
            yield from (v for v in values if v is not SHARD_END)

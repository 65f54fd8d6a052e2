"""The round gathers of ``batch_across_shards``: one request per live shard per round.

:class:`SyncGather` is the plain barrier (the next round is asked for when the reader pulls
again); :class:`DeadlineGather` closes a round at a deadline and keeps late requests in flight,
and, with ``ahead``, asks for the next round as soon as a round is fetched, before it goes
downstream (the shards work while the reader uses the round).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

from rlflow.errors import ActorDiedError
from rlflow.flow import backend
from rlflow.flow.gather import GatherBase, Read, Shard, _fetch, _perf
from rlflow.flow.recovery import ShardSlots
from rlflow.flow.sentinels import NOT_READY, SHARD_END
from rlflow.flow.stages import BuildEnv, call_user

__all__ = ["DeadlineGather", "SyncGather"]


class SyncGather(GatherBase):
    """``batch_across_shards``: one request per live shard per round; yields the round.

    A shard whose actor died gives nothing that round; its replacement joins the next one.
    """

    def __call__(self, env: BuildEnv) -> Iterator[Any]:
        read, slots = self.open_read(env)
        label = self.label
        stats = env.ctx.stage(label)
        while slots.live or slots.left_out:
            if read.closed:
                raise read.closed_error()
            slots.revive_or_raise()
            active = sorted(slots.live)
            refs = [read.request(slots.live[p]) for p in active]
            start = _perf()
            if env.timeout is not None:
                while True:
                    _, not_ready = backend.wait(refs, num_returns=len(refs), timeout=0)
                    if not not_ready:
                        break
                    env.waiter.pending(not_ready)
                    stats.wait_time_s += _perf() - start
                    yield NOT_READY
                    start = _perf()
            round_items = _fetch_round(refs, active, slots, label, env)
            stats.wait_time_s += _perf() - start
            if round_items:
                stats.items += 1
                slots.count()
                yield round_items


class DeadlineGather(GatherBase):
    """``batch_across_shards(timeout_s=...)``: a round closes at its deadline; late replies
    carry over.

    Each round asks every live shard that has no request in flight for one item, then waits
    until every request in flight has answered or ``timeout_s`` has passed (and at least one
    has answered: a round is never empty). It yields the replies ready then, in shard order,
    replies to earlier rounds' requests included. A request still out stays in flight: it is
    never asked again nor dropped, and its reply goes into the first round that finds it ready.
    ``on_late(n)`` (with the plan's context current) is told of the ``n`` requests a round
    closed without, each request once. In a polling read the deadline is checked on each pass.
    ``timeout_s=None``: no deadline (every request in flight answers before a round closes).

    With ``ahead``, the next round's requests go out as soon as a round is fetched, before it
    goes downstream: the shards work while the reader uses the round (in a sampling plan the
    next round is then sampled with weights one update older).
    """

    def __init__(
        self,
        shards: Sequence[Shard],
        timeout_s: float | None,
        on_late: Callable[[int], Any] | None,
        label: str,
        name: str,
        *,
        ahead: bool = False,
    ) -> None:
        super().__init__(shards, label, name)
        self.timeout_s = timeout_s
        self.on_late = on_late
        self.ahead = ahead

    @staticmethod
    def _ask(out: dict[int, Any], slots: ShardSlots, read: Read) -> None:
        """One request to every live shard that has none in flight."""
        for pos in sorted(slots.live):
            if pos not in out:
                out[pos] = read.request(slots.live[pos])

    def __call__(self, env: BuildEnv) -> Iterator[Any]:
        read, slots = self.open_read(env)
        stats = env.ctx.stage(self.label)
        out: dict[int, Any] = {}  # shard position -> its request in flight
        late: set[int] = set()  # positions whose request in flight was already reported late
        while slots.live or slots.left_out:
            if read.closed:
                raise read.closed_error()
            slots.revive_or_raise()
            self._ask(out, slots, read)
            start = _perf()
            ready = yield from self._wait(list(out.values()), env)
            done = set(ready)
            positions = sorted(p for p, ref in out.items() if ref in done)
            refs = [out.pop(p) for p in positions]
            late.difference_update(positions)
            round_items = _fetch_round(refs, positions, slots, self.label, env)
            stats.wait_time_s += _perf() - start
            self._report_late([p for p in out if p not in late], env)
            late.update(out)
            if self.ahead:
                self._ask(out, slots, read)
            if round_items:
                stats.items += 1
                slots.count()
                yield round_items

    def _wait(self, refs: list[Any], env: BuildEnv) -> Generator[Any, None, list[Any]]:
        """The requests ready when the round closes (NOT_READY yielded while polling)."""
        if env.timeout is None:
            ready, _ = backend.wait(refs, num_returns=len(refs), timeout=self.timeout_s)
            if not ready:
                backend.wait(refs, num_returns=1)
                ready, _ = backend.wait(refs, num_returns=len(refs), timeout=0)
            return ready
        deadline = _perf() + (float("inf") if self.timeout_s is None else self.timeout_s)
        while True:
            ready, not_ready = backend.wait(refs, num_returns=len(refs), timeout=0)
            if not not_ready or (ready and _perf() >= deadline):
                return ready
            env.waiter.pending(not_ready)
            yield NOT_READY

    def _report_late(self, positions: list[int], env: BuildEnv) -> None:
        if positions and self.on_late is not None:
            call_user(self.on_late, len(positions), self.label, env)


def _fetch_round(
    refs: list[Any], positions: list[int], slots: ShardSlots, label: str, env: BuildEnv
) -> list[Any]:
    """The items of one synchronous round, in shard order; ended shards leave ``slots.live``,
    dead ones are replaced or left out (they give nothing this round).

    The round is fetched in one ``get`` (one backend call, not one per shard); only when that
    raises are the replies fetched one by one, to tell which shard failed."""
    try:
        values = backend.get(refs)
    except Exception:  # noqa: BLE001 - any failure: refetch one by one to name the shard
        values = None
    items = []
    for i, (ref, pos) in enumerate(zip(refs, positions, strict=True)):
        try:
            item = values[i] if values is not None else _fetch(ref, slots.live[pos], label, env)
        except ActorDiedError as err:
            slots.died(pos, err)
            continue
        if item is SHARD_END:
            del slots.live[pos]
        else:
            items.append(item)
    return items

"""What a gather does when a shard's actor dies: :class:`ShardRecovery`, and its bookkeeping.

Without a recovery a dead actor ends the read with :class:`~rlflow.errors.ActorDiedError` (named
after the stage and the shard). With one (``from_actors(actors, recovery=ShardRecovery(fn))``)
the gather drops the dead shard's requests and calls ``fn(shard_index, dead_actor, error)``:

- it returns an actor: the gather builds the shard's chain on it (same transforms, same read)
  and goes on reading it in the dead one's place;
- it returns None: the shard is left out and the stream goes on with the others (elastic); the
  gather asks again after every ``retry_every`` items it yields (rounds for the synchronous
  gathers), so the shard can come back. When no shard is left, every left-out one is asked at
  once; if none comes back the read ends with :class:`ActorDiedError`;
- it raises: the error ends the read, with a note naming the stage and the shard.

``fn`` runs in the reader, with the plan's context current (``flow.current_metrics()``), so it
can count what it did. It is asked once per dead actor per read: several gathers over one actor
each ask, so ``fn`` should answer a second ask about the same dead actor with the same
replacement. A replacement that is dead before its first request is left out, and the next ask
is about it: asked about the first dead actor, ``fn`` would hand out the dead replacement again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from rlflow.errors import ActorDiedError
from rlflow.flow.stages import BuildEnv, call_user

if TYPE_CHECKING:
    from rlflow.flow.gather import GatherBase, Read, Shard

ReplaceActor = Callable[[int, Any, ActorDiedError], Any]
"""``(shard index in its source, the dead actor, the error) -> a new actor, or None``."""


class ShardRecovery(NamedTuple):
    """How gathers meet the death of a shard's actor; give it to ``from_actors(recovery=)``."""

    replace: ReplaceActor
    """Called with (shard index, dead actor, error); returns the replacement actor or None."""
    retry_every: int = 10
    """Items (rounds for synchronous gathers) between asks for a shard left out, >= 1."""


class _LeftOut(NamedTuple):
    shard: Shard
    error: ActorDiedError
    due: int  # the item count at which to ask again


class ShardSlots:
    """The shards one read reads, by position; dead ones are replaced or left out.

    ``live`` maps each position to the shard read there now; ended shards leave it.
    """

    def __init__(self, base: GatherBase, read: Read, env: BuildEnv) -> None:
        self.base, self.read, self.env = base, read, env
        self.live: dict[int, Shard] = dict(enumerate(base.shards))
        self.left_out: dict[int, _LeftOut] = {}
        self._items = 0

    def died(self, pos: int, err: ActorDiedError) -> Shard | None:
        """The actor at ``pos`` is dead: its replacement (open for this read), or None when the
        shard is left out. Raises ``err`` when the shard has no recovery."""
        shard = self.live.pop(pos)
        if shard.recovery is None:
            raise err
        return self._ask(pos, shard, err)

    def _ask(self, pos: int, shard: Shard, err: ActorDiedError) -> Shard | None:
        assert shard.recovery is not None
        recovery, label = shard.recovery, self.base.label
        env = BuildEnv(self.env.ctx, self.env.timeout, self.env.waiter, shard.where)
        actor = call_user(
            lambda _: recovery.replace(shard.source_index, shard.actor, err), None, label, env
        )
        if actor is None:
            self.left_out[pos] = _LeftOut(shard, err, self._items + recovery.retry_every)
            return None
        new = shard._replace(actor=actor)
        self.read.swap_actor(shard.actor, actor)
        dead = self.read.open([new], label, self.env)
        if dead:  # died before its first request: ask again later, about it (not the first)
            self.left_out[pos] = _LeftOut(new, dead[0], self._items + recovery.retry_every)
            return None
        self.base.shards[pos] = new  # later reads of this gather start on the new actor
        self.live[pos] = new
        return new

    def count(self, items: int = 1) -> list[int]:
        """Count items handed downstream; the positions of left-out shards asked again now and
        back (live again)."""
        self._items += items
        due = [pos for pos, out in self.left_out.items() if out.due <= self._items]
        return self._ask_again(due)

    def revive_or_raise(self) -> list[int]:
        """With no live shard left: ask for every left-out one now; the positions back, or
        :class:`ActorDiedError` when none came back. Nothing to do when none was left out."""
        if self.live or not self.left_out:
            return []
        back = self._ask_again(list(self.left_out))
        if not back:
            first = next(iter(self.left_out.values()))
            raise ActorDiedError(
                f"gather {self.base.name}: the actors of all {len(self.left_out)} shards still "
                f"to read died and none could be replaced (last error: {first.error})"
            )
        return back

    def _ask_again(self, positions: list[int]) -> list[int]:
        back = []
        for pos in sorted(positions):
            out = self.left_out.pop(pos)
            if self._ask(pos, out.shard, out.error) is not None:
                back.append(pos)
        return back

"""`ReplayShardTable`: the current replay shard handles, and how a dead one is recreated.

A replay shard holds nothing that cannot be lost (DESIGN.md "Failures are normal"): when one dies
it is started again empty, with the same index, capacity share, ``learning_starts`` share,
alpha/beta and seed. The table owns the handles (as `~rlflow.workers.WorkerSet` owns the
workers): `StoreToReplayBuffer`, `replay` and `UpdateReplayPriorities` read the shard of index
k from it, so they all move to the new shard together. ``actors`` is one list, changed in place,
so a `ReplayShards` made on it checkpoints the shards of the moment.

Example:
    >>> from rlflow import flow
    >>> flow.init(backend="local")
    >>> spec = ReplayShardSpec(num_shards=2, capacity=100, learning_starts=4, num_items=3, seed=0)
    >>> table = create_replay_shards(spec)
    >>> dead = table.actors[1]
    >>> flow.kill(dead)
    >>> new = table.replace(1, dead)
    >>> new is table.actors[1], table.num_restarts, table.index_of(dead)
    (True, 1, None)
    >>> table.replace(1, dead) is new  # a second ask about the same dead actor
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rlflow.errors import ActorDiedError, ConfigError
from rlflow.replay.actors import ReplayShardSpec, replay_actor_starter

StartShard = Callable[[int], Any]
"""``shard index -> a new, empty shard actor`` (as the first one of that index was started)."""


class ReplayShardTable:
    """The current handle of each replay shard, by index; a dead one is replaced by a new one.

    Args:
        actors: the shard actors, in shard order (at least one).
        start: starts shard k empty again; None: a dead shard cannot be replaced (`replace`
            raises `ActorDiedError` naming "replay shard k of N").
    """

    def __init__(self, actors: Sequence[Any], *, start: StartShard | None = None) -> None:
        """Keep the handles (a list of them, changed in place when a shard is replaced)."""
        self.actors: list[Any] = list(actors)
        if not self.actors:
            raise ConfigError("ReplayShardTable(actors=[]) needs at least one replay shard")
        self.start = start
        self.num_restarts = 0
        """Shards started again by this table (the plan counts its own in its context)."""

    def __len__(self) -> int:
        return len(self.actors)

    @property
    def recovers(self) -> bool:
        """Whether a dead shard is started again (a ``start`` was given)."""
        return self.start is not None

    def label(self, index: int) -> str:
        """``"replay shard k of N"``, for messages."""
        return f"replay shard {index} of {len(self.actors)}"

    def index_of(self, actor: Any) -> int | None:
        """The index of ``actor`` if it is a current shard; None for a replaced (or foreign)
        one."""
        for i, current in enumerate(self.actors):
            if current is actor or current == actor:
                return i
        return None

    def replace(self, index: int, dead: Any, error: BaseException | None = None) -> Any:
        """The shard ``index`` whose actor ``dead`` died: its replacement, started empty now,
        or the one already started when ``dead`` was replaced before (asked again).

        Raises `ActorDiedError` naming the shard when the table has no ``start``; an error of
        ``start`` gets a note naming the shard.
        """
        current = self.actors[index]
        if not (current is dead or current == dead):
            return current
        if self.start is None:
            raise ActorDiedError(f"{self.label(index)} died: {error}")
        try:
            new = self.start(index)
        except Exception as err:
            err.add_note(f"while starting {self.label(index)} again after it died")
            raise
        self.actors[index] = new
        self.num_restarts += 1
        return new


def as_shard_table(actors: ReplayShardTable | Sequence[Any]) -> ReplayShardTable:
    """``actors`` as a table: itself, or a plain list wrapped without recovery."""
    if isinstance(actors, ReplayShardTable):
        return actors
    return ReplayShardTable(list(actors))


def create_replay_shards(spec: ReplayShardSpec) -> ReplayShardTable:
    """`create_replay_actors` as a `ReplayShardTable` that starts a dead shard again empty,
    from the same ``spec`` (same capacity and ``learning_starts`` shares, seed ``seed + k``)."""
    start = replay_actor_starter(spec)
    return ReplayShardTable([start(i) for i in range(spec.num_shards)], start=start)

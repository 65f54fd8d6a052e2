"""Replay shards that die are started again empty (DESIGN.md "Failures are normal").

`replay` reads the shards of a `~rlflow.replay.shards.ReplayShardTable` through
``flow.from_actors(..., recovery=replay_shard_recovery(table))``: when a shard's actor dies the
gather drops its requests and asks :class:`RecreateReplayShard`, which has the table start the
shard again (same index, empty) and counts it. `StoreToReplayBuffer` asks the same table when an
``add_batch`` finds the shard dead; a second ask about the same dead actor gets the same new
shard, so each death is counted once. Shards are always recreated: they hold nothing that
cannot be lost.
"""

from __future__ import annotations

from typing import Any, Final

from rlflow import flow
from rlflow.ops import keys
from rlflow.replay.shards import ReplayShardTable

__all__ = ["RecreateReplayShard", "replace_shard_in_plan", "replay_shard_recovery"]

RETRY_EVERY: Final = 5
"""Items of the replay gather between asks for a shard that could not be started again."""


def replace_shard_in_plan(
    table: ReplayShardTable, index: int, *, dead: Any, error: BaseException | None
) -> Any:
    """The new actor of shard ``index`` (whose actor ``dead`` died), from inside a running
    plan. Side effect: counter ``num_replay_shard_restarts`` (once per dead actor). Raises
    ``ActorDiedError`` naming "replay shard k of N" when the table does not recover."""
    before = table.num_restarts
    try:
        return table.replace(index, dead, error)
    finally:
        flow.current_metrics().counters[keys.NUM_REPLAY_SHARD_RESTARTS] += (
            table.num_restarts - before
        )


class RecreateReplayShard:
    """The replacement hook of the replay gather (``flow.ShardRecovery.replace``).

    Called as ``(shard index, dead actor, error) -> new actor`` by a gather over
    ``flow.from_actors(table.actors)``; see :func:`replace_shard_in_plan`.
    """

    def __init__(self, table: ReplayShardTable) -> None:
        """Keep the table whose shards it starts again."""
        self.table = table

    def __call__(self, shard_index: int, dead: Any, error: BaseException) -> Any:
        return replace_shard_in_plan(self.table, shard_index, dead=dead, error=error)


def replay_shard_recovery(table: ReplayShardTable) -> flow.ShardRecovery | None:
    """The ``recovery`` to give ``flow.from_actors`` over ``table.actors``; None when the table
    does not recover (a plain list of actors)."""
    if not table.recovers:
        return None
    return flow.ShardRecovery(RecreateReplayShard(table), retry_every=RETRY_EVERY)

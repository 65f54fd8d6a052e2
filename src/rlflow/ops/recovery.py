"""Rollout workers that die are recreated and the plan goes on (DESIGN.md "Failures are normal").

The rollout sources read the remote workers through ``flow.from_actors(..., recovery=
rollout_recovery(workers))``: when a worker's actor dies, the gather drops its requests in flight
and asks :class:`RecreateFailedWorker` for a replacement, which
:meth:`~rlflow.workers.WorkerSet.recreate_worker` starts with the same index, the learner's
weights and the plan's global vars. With ``recreate_failed_workers=False`` or
``max_worker_restarts`` reached, the death ends the run with a ``WorkerError`` naming the worker.
"""

from __future__ import annotations

from typing import Any, Final

from rlflow import flow
from rlflow.errors import ActorDiedError
from rlflow.ops import keys
from rlflow.workers import WorkerSet

__all__ = ["RecreateFailedWorker", "grow_in_plan", "recreate_in_plan", "rollout_recovery"]

RETRY_EVERY: Final = 5
"""Items of a rollout gather (rounds for bulk_sync) between asks for a worker that could not be
started (its node is gone): the run goes on without it and it comes back with capacity."""


def recreate_in_plan(workers: WorkerSet, index: int, *, dead: Any, error: BaseException) -> Any:
    """Recreate the dead remote worker ``index`` (1..N) from inside a running plan; return the
    new handle, or None while it cannot start.

    Side effects: the worker's weights and ``{"timestep": env steps sampled}`` pushed to the new
    actor (see ``WorkerSet.recreate_worker``); counter ``num_worker_restarts``. The count of the
    plan's context (kept in checkpoints) is the run's: a restored run goes on from it, so
    ``max_worker_restarts`` holds over the whole run. Raises ``WorkerError`` naming the worker
    when recreation is off or the cap is reached.
    """
    counters = flow.current_metrics().counters
    workers.num_restarts = max(workers.num_restarts, counters[keys.NUM_WORKER_RESTARTS])
    global_vars = {"timestep": counters[keys.NUM_ENV_STEPS_SAMPLED]}
    try:
        return workers.recreate_worker(index, dead=dead, error=error, global_vars=global_vars)
    finally:
        counters[keys.NUM_WORKER_RESTARTS] = workers.num_restarts


def grow_in_plan(workers: WorkerSet) -> list[int]:
    """Install the remote workers that finished starting (`WorkerSet.grow`: an elastic run's
    missing workers on a node that joined, replacements of dead ones) from inside a running
    plan, without waiting; return their indexes.

    Side effects: each new worker gets the learner's weights and ``{"timestep": env steps
    sampled}``; counter ``num_worker_restarts`` (replacements only). The rollout sources read
    a new worker from their next ask for its slot (every `RETRY_EVERY` items).
    """
    counters = flow.current_metrics().counters
    workers.num_restarts = max(workers.num_restarts, counters[keys.NUM_WORKER_RESTARTS])
    global_vars = {"timestep": counters[keys.NUM_ENV_STEPS_SAMPLED]}
    try:
        return workers.grow(global_vars)
    finally:
        counters[keys.NUM_WORKER_RESTARTS] = workers.num_restarts


class RecreateFailedWorker:
    """The replacement hook of the rollout gathers (``flow.ShardRecovery.replace``).

    Called as ``(shard index, dead actor, error) -> new actor | None`` by a gather over
    ``flow.from_actors(workers.remote_workers())`` (shard i is worker i + 1); see
    :func:`recreate_in_plan` for what it does.
    """

    def __init__(self, workers: WorkerSet) -> None:
        """Keep the worker set whose workers it recreates."""
        self.workers = workers

    def __call__(self, shard_index: int, dead: Any, error: ActorDiedError) -> Any:
        return recreate_in_plan(self.workers, shard_index + 1, dead=dead, error=error)


def rollout_recovery(workers: WorkerSet) -> flow.ShardRecovery:
    """The ``recovery`` to give ``flow.from_actors`` over ``workers.remote_workers()``."""
    return flow.ShardRecovery(RecreateFailedWorker(workers), retry_every=RETRY_EVERY)

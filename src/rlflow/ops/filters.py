"""Observation filter sync: message passing between the plan's stages and the rollout workers.

:class:`SyncObservationFilters` is RLlib's ``FilterManager.synchronize`` as a dataflow stage.
:func:`~rlflow.ops.metrics.standard_metrics_reporting`, which ends every plan, runs it once per
training iteration when ``observation_filter`` is not ``"NoFilter"``, so every algorithm, sync
or async, on either backend, has its filters synced the same way:

1. each remote worker is asked for its filters, their deltas taken (``get_filters(
   flush_after=True)``: the statistics of the observations it saw since the last sync);
2. the learner (the local worker) merges the deltas into its own filters, which thereby hold
   every observation any worker saw (exact pairwise merges, `rlflow.filters.RunningStat`);
3. the merged filters are stored once and sent to every remote worker, which keeps them plus
   the delta it gathered since step 1 (``sync_filters``), so nothing is lost or counted twice.

A worker's calls run in the order they were sent, so on Ray a worker busy sampling answers
after its current sample; the stage waits for the answers up to ``sample_timeout_s`` (None:
for all of them). An answer that comes later is merged at the next sync; a worker found dead is
recreated (it gets the learner's filters with its weights) or ends the run with a
``WorkerError`` naming it, as in :class:`~rlflow.ops.metrics.CollectMetrics`. Timer
``filter_sync``.
"""

from __future__ import annotations

from typing import Any

from rlflow import flow
from rlflow.errors import ActorDiedError, WorkerError
from rlflow.ops import keys
from rlflow.ops.recovery import recreate_in_plan
from rlflow.workers import WorkerSet

__all__ = ["SyncObservationFilters"]


class SyncObservationFilters:
    """``for_each``: gather the workers' filter deltas, merge them into the learner's filters
    and broadcast those (see the module docstring). Items pass through unchanged.

    Args:
        workers: the run's worker set (the local worker's filters are the merged ones).
        timeout_s: how long to wait for the workers' answers (None: until all answered).

    Side effects: the local worker's filters (merged), the remote workers' filters (synced),
    timer ``filter_sync``; counter ``num_worker_restarts`` when a dead worker is recreated.
    """

    def __init__(self, workers: WorkerSet, *, timeout_s: float | None = None) -> None:
        """Keep the worker set."""
        self.workers = workers
        self.timeout_s = timeout_s
        self._pending: dict[int, tuple[Any, Any]] = {}  # worker index -> (handle, request)

    def __call__(self, item: Any) -> Any:
        with flow.current_metrics().timers[keys.FILTER_SYNC_TIMER].timing():
            self.sync()
        return item

    def sync(self) -> None:
        """One round of gather, merge and broadcast."""
        workers = self.workers
        local = workers.local_worker()
        if not local.filters:
            return
        for handle in workers.healthy_workers():
            i = workers.worker_index(handle)
            if i not in self._pending:
                self._pending[i] = (handle, handle.get_filters.remote(flush_after=True))
        if self._pending:
            refs = [ref for _, ref in self._pending.values()]
            ready, _ = flow.wait(refs, num_returns=len(refs), timeout=self.timeout_s)
            for i, (handle, ref) in list(self._pending.items()):
                if ref in ready:
                    del self._pending[i]
                    filters = self._read(i, handle, ref)
                    if filters is not None:
                        local.apply_filter_changes(filters)
        # The learner's own observations (when it samples) are in its running statistics
        # already: its delta is dropped.
        for own in local.filters.values():
            own.take_delta()
        workers.sync_filters()

    def _read(self, index: int, handle: Any, ref: Any) -> Any:
        """Worker ``index``'s filters, or None if it died (recreated, or the error named)."""
        try:
            return flow.get(ref)
        except ActorDiedError as err:
            recreate_in_plan(self.workers, index, dead=handle, error=err)
        except WorkerError as err:
            raise self.workers.worker_failure(err) from err
        return None

"""`WorkerFilters`: a rollout worker's half of the observation-filter sync (`rlflow.filters`).

The learner's `rlflow.ops.filters.SyncObservationFilters` gets every worker's filters with
`WorkerFilters.get_filters` (flushing their deltas), merges them into the local worker's with
`WorkerFilters.apply_filter_changes`, and broadcasts the result back with
`WorkerFilters.sync_filters`: the paper's message passing between dataflow stages.
`rlflow.workers.RolloutWorker` extends this class.
"""

from __future__ import annotations

from collections.abc import Mapping

from rlflow.filters import MeanStdFilter

__all__ = ["WorkerFilters"]

PolicyID = str


class WorkerFilters:
    """The filter methods of `rlflow.workers.RolloutWorker` (RLlib's names)."""

    filters: dict[PolicyID, MeanStdFilter]
    """One observation filter per policy (none with ``"NoFilter"``); the sampler updates them."""

    def get_filters(self, *, flush_after: bool = False) -> dict[PolicyID, MeanStdFilter]:
        """Copies of the observation filters (RLlib's name), each with its running
        statistics and its delta (observations since the delta was last taken); with
        ``flush_after`` the deltas are then taken (emptied): the learner is merging them."""
        out = {pid: f.copy() for pid, f in self.filters.items()}
        if flush_after:
            for f in self.filters.values():
                f.take_delta()
        return out

    def apply_filter_changes(self, filters: Mapping[PolicyID, MeanStdFilter]) -> None:
        """Learner side: add the deltas of another worker's `get_filters` to these filters'
        running statistics (policies this worker has no filter for are ignored)."""
        for pid, other in filters.items():
            mine = self.filters.get(pid)
            if mine is not None:
                mine.apply_changes(other)

    def sync_filters(self, filters: Mapping[PolicyID, MeanStdFilter]) -> None:
        """Worker side: take the learner's filters (RLlib's name), keeping this worker's
        delta on top (`rlflow.filters.MeanStdFilter.sync`); the filters are updated in place
        (the sampler holds them)."""
        for pid, other in filters.items():
            mine = self.filters.get(pid)
            if mine is not None:
                mine.sync(other)

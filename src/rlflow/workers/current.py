"""`current_worker`: the rollout worker whose shard stream is being read right now.

`CurrentWorkerReads` is the base of `rlflow.workers.RolloutWorker`: it serves the reads of its
shard stream (``flow.ParallelIteratorWorker``) with itself as the current worker, so functions
shipped to the workers (``ParallelIterator.for_each``) can reach it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rlflow.errors import ConfigError
from rlflow.flow import ParallelIteratorWorker, ShardReply

if TYPE_CHECKING:
    from rlflow.workers.rollout_worker import RolloutWorker

__all__ = ["CurrentWorkerReads", "current_worker"]

_CURRENT: contextvars.ContextVar[RolloutWorker | None] = contextvars.ContextVar(
    "rlflow_current_worker", default=None
)


def current_worker() -> RolloutWorker:
    """The rollout worker whose shard stream is being read right now.

    For functions shipped to rollout actors with ``ParallelIterator.for_each`` (e.g. "compute
    gradients on the batch this worker just sampled"). Set only while a worker serves a read of
    its stream, so it never leaks between workers, even when several share a process (local
    backend).
    """
    worker = _CURRENT.get()
    if worker is None:
        raise ConfigError(
            "current_worker() was called outside a rollout worker's stream: call it only in a "
            "function shipped to rollout workers (ParallelIterator.for_each on from_actors(...))"
        )
    return worker


class CurrentWorkerReads(ParallelIteratorWorker):
    """A ``ParallelIteratorWorker`` whose shard reads run with it as :func:`current_worker`."""

    @contextlib.contextmanager
    def _as_current(self) -> Iterator[None]:
        token = _CURRENT.set(self)  # type: ignore[arg-type]  # only RolloutWorker extends it
        try:
            yield
        finally:
            _CURRENT.reset(token)

    def par_iter_next(self, key: int) -> Any:
        """As :meth:`ParallelIteratorWorker.par_iter_next`, with :func:`current_worker` set."""
        with self._as_current():
            return super().par_iter_next(key)

    def par_iter_next_batch(self, key: int, batch_ms: float) -> ShardReply:
        """As :meth:`ParallelIteratorWorker.par_iter_next_batch`, with the worker current."""
        with self._as_current():
            return super().par_iter_next_batch(key, batch_ms)

    def par_iter_slice(self, key: int, step: int, start: int) -> Any:
        """As :meth:`ParallelIteratorWorker.par_iter_slice`, with the worker current."""
        with self._as_current():
            return super().par_iter_slice(key, step, start)

"""`WorkerSet`: the local (learner) rollout worker plus ``num_workers`` remote ones."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlflow import flow
from rlflow.config import AlgorithmConfig
from rlflow.errors import WorkerError
from rlflow.policy import TorchPolicy
from rlflow.workers.rollout_worker import RolloutWorker

__all__ = ["WorkerSet"]

logger = logging.getLogger(__name__)

_PING_TIMEOUT_S = 5.0


class WorkerSet:
    """One local :class:`RolloutWorker` (index 0, the learner) and N remote ones (1..N).

    Remote workers are actors created with ``num_cpus=1``: a rollout worker steps envs and runs
    inference in a tight loop, so it keeps one core busy; reserving the core stops Ray from
    packing more busy workers than there are cores (which slows every one of them, see
    DESIGN.md "Speed habits"), while zero-CPU helpers (replay shards, iterator actors) still fit.

    Args:
        config: the algorithm config; ``num_workers`` remote workers are started.
        policy_cls: the policy class every worker builds.
    """

    def __init__(self, config: AlgorithmConfig, policy_cls: type[TorchPolicy]) -> None:
        """Build the local worker now and start the remote actors."""
        self.config = config
        self._local = RolloutWorker(config, policy_cls, worker_index=0)
        actor_cls = flow.remote(RolloutWorker).options(num_cpus=1)
        self._remote: list[Any] = [
            actor_cls.remote(config, policy_cls, worker_index=i)
            for i in range(1, config.num_workers + 1)
        ]

    def local_worker(self) -> RolloutWorker:
        """The learner: a plain object in this process."""
        return self._local

    def remote_workers(self) -> list[Any]:
        """Handles of the remote workers, in index order (index i is at position i - 1)."""
        return list(self._remote)

    def worker_index(self, actor: Any) -> int:
        """The index (1..N) of a remote worker's handle."""
        for i, handle in enumerate(self._remote, start=1):
            if handle is actor or handle == actor:
                return i
        raise WorkerError(f"WorkerSet: {actor!r} is not one of this set's remote workers")

    def sync_weights(
        self,
        global_vars: Mapping[str, Any] | None = None,
        *,
        policies: Sequence[str] | None = None,
        to: Sequence[Any] | None = None,
        blocking: bool = False,
    ) -> None:
        """Push the local worker's weights to the remote workers (all, or the handles in ``to``).

        The weights are stored once (``flow.put``) and the reference is passed to every
        ``set_weights`` call. Non-blocking by default: each actor runs the call before any
        later call from this process, so the next sample uses the new weights. With
        ``blocking=True`` it waits, and a dead worker raises :class:`WorkerError` naming it.
        """
        targets = self._remote if to is None else list(to)
        if not targets:
            return
        ref = flow.put(self._local.get_weights(policies))
        refs = [w.set_weights.remote(ref, global_vars) for w in targets]
        if blocking:
            for handle, r in zip(targets, refs, strict=True):
                self._get(r, handle)

    def foreach_worker(self, fn: Callable[[RolloutWorker], Any]) -> list[Any]:
        """``fn(worker)`` on every worker, local first, then remote in index order."""
        results = [fn(self._local)]
        refs = [w.apply.remote(fn) for w in self._remote]
        results.extend(self._get(r, w) for r, w in zip(refs, self._remote, strict=True))
        return results

    def dead_workers(self, timeout_s: float = _PING_TIMEOUT_S) -> list[int]:
        """Indexes of remote workers that do not answer a ping (dead or unreachable)."""
        refs = [w.ping.remote() for w in self._remote]
        dead = []
        for i, ref in enumerate(refs, start=1):
            try:
                flow.get(ref, timeout=timeout_s)
            except WorkerError:
                dead.append(i)
            except Exception:  # noqa: BLE001 - a busy worker that times out is alive
                continue
        return dead

    def worker_failure(self, err: WorkerError) -> WorkerError:
        """A :class:`WorkerError` naming the dead workers' indexes, for ``err`` raised by an
        actor call; ``err`` itself when no worker is found dead."""
        dead = self.dead_workers()
        if not dead:
            return err
        new = WorkerError(
            f"rollout worker(s) {dead} of {len(self._remote)} died or are unreachable "
            f"(index 0 is the local learner): {err}. Check the workers' logs (out of memory, an "
            "env that crashed the process) and restart the run."
        )
        for note in getattr(err, "__notes__", ()):
            new.add_note(note)
        return new

    def _get(self, ref: Any, handle: Any) -> Any:
        try:
            return flow.get(ref)
        except WorkerError as err:
            raise WorkerError(
                f"rollout worker {self.worker_index(handle)} died or is unreachable: {err}"
            ) from err

    def stop(self) -> None:
        """Close the local worker's envs and kill the remote actors."""
        self._local.stop()
        for handle in self._remote:
            try:
                flow.kill(handle)
            except Exception:
                logger.debug("could not kill %r", handle, exc_info=True)
        self._remote = []

    def __repr__(self) -> str:
        return f"WorkerSet(local=1, remote={len(self._remote)})"

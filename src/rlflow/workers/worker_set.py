"""`WorkerSet`: the local (learner) rollout worker plus ``num_workers`` remote ones.

A remote worker that dies is recreated with the same index (:meth:`WorkerSet.recreate_worker`)
when the config allows it (``recreate_failed_workers``, ``max_worker_restarts``); the plan's
rollout sources ask for it (see ``rlflow.ops.recovery``). An elastic run (``min_workers`` <
``num_workers``) may start with fewer workers than it asks for: the others are missing (their
slots hold a dead placeholder, as a dead worker's do) until a node with room joins, and
:meth:`WorkerSet.grow` installs them between iterations.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlflow import flow
from rlflow.checks import check_callable, check_int, check_number
from rlflow.config import AlgorithmConfig
from rlflow.errors import ConfigError, OfflineDataError, WorkerError
from rlflow.policy import TorchPolicy
from rlflow.workers.learner_group import LearnerGroup
from rlflow.workers.placement import (
    START_TIMEOUT_S,
    StartedWorkers,
    WorkerPlacement,
    check_remote_gpus,
)
from rlflow.workers.rollout_worker import RolloutWorker

__all__ = ["WorkerSet"]

logger = logging.getLogger(__name__)

_PING_TIMEOUT_S = 5.0


class WorkerSet:
    """One local :class:`RolloutWorker` (index 0, the learner) and N remote ones (1..N).

    Remote workers are actors that reserve ``num_cpus_per_worker`` (default 1) and
    ``custom_resources_per_worker``: a rollout worker steps envs and runs inference in a tight
    loop, so it keeps one core busy; reserving the core stops Ray from packing more busy workers
    than there are cores (which slows every one of them, see DESIGN.md "Speed habits"), while
    zero-CPU helpers (replay shards, iterator actors) still fit. On Ray the reservations are one
    placement group (``placement_strategy``), bundle i - 1 for worker i, a recreated worker
    going back into its bundle; it waits up to ``start_timeout_s`` to be placed (else
    ``ConfigError``) and is removed by :meth:`stop` (or when the set is garbage collected).
    Workers that reserve nothing get no group. Built inside a placement group of
    ``num_workers + 1`` bundles (a Ray Tune trial of `rlflow.tune.trainable`, whose bundle 0
    holds the learner), the workers take its bundles 1..N instead and no group is created (a
    second one could never be placed on a full machine); its owner removes it. The local
    backend ignores all of this.

    Args:
        config: the algorithm config; ``num_workers`` remote workers are started.
        policy_cls: the policy class every worker builds.
        local_worker: the learner's worker (index 0), already built from ``config`` and
            ``policy_cls`` (a `rlflow.Trainer` builds it before the backend starts, as its
            check of the env); None: built here.
        start_timeout_s: how long :meth:`recreate_worker` waits for a new actor to answer
            when no other worker is healthy (seconds, > 0).
        algorithm: the algorithm's registered name, for the messages of the learner actors
            (``num_learners`` >= 1, `rlflow.workers.learner_group`).
        started: remote workers already started for this very ``config``
            (`rlflow.workers.placement.start_remote_workers`): the set adopts them and their
            placement group instead of starting its own (`ConfigError` for workers started
            for another config, adopted by another set, or stopped).

    The reservation and the start of each remote worker are `WorkerPlacement`'s
    (`rlflow.workers.placement`), also when a dead worker is recreated.

    Elastic runs (``min_workers`` < ``num_workers``): all ``num_workers`` actors are asked for
    at once; the set waits (up to ``start_timeout_s``) until as many answer as the cluster's
    free resources held before they started (`WorkerPlacement.workers_that_fit`), and at least
    ``min_workers`` (`ConfigError` when fewer answer in time). The rest stay queued in Ray
    (the autoscaler is asked for room: `WorkerPlacement.request_capacity`); their slots hold an
    absent actor (`rlflow.flow.absent_actor`), which the plan's operators treat as a dead
    worker, and :meth:`grow` (each iteration, `rlflow.ops.recovery.grow_in_plan`) or a rollout
    source's recovery installs each one once it started, with the learner's weights. They are
    not restarts (``num_restarts``), and ``recreate_failed_workers=False`` does not stop them.
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        policy_cls: type[TorchPolicy],
        *,
        local_worker: RolloutWorker | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        algorithm: str | None = None,
        started: StartedWorkers | None = None,
    ) -> None:
        """Build the local worker (the learner) here unless given, then start the remote
        actors."""
        self.config = config
        self.policy_cls = policy_cls
        self.start_timeout_s = check_number(
            start_timeout_s, "WorkerSet: start_timeout_s", low=0, low_open=True
        )
        if local_worker is not None and local_worker.worker_index != 0:
            raise ConfigError(
                f"WorkerSet(local_worker={local_worker!r}): the local worker is the learner, "
                "worker index 0"
            )
        # Before the local worker builds a policy on cuda (a given one was checked by its
        # builder, `check_learner_gpu`); started workers were checked before they started.
        if started is None:
            check_remote_gpus(config)
        self._local = local_worker or RolloutWorker(config, policy_cls, worker_index=0)
        if started is None:
            self._placement = WorkerPlacement(config, timeout_s=self.start_timeout_s)
            self._remote: list[Any] = [
                self._placement.start(i, policy_cls) for i in range(1, config.num_workers + 1)
            ]
        else:
            self._placement, self._remote = self._adopt(started)
        self._dead: set[int] = set()
        self._starting: dict[int, tuple[Any, Any]] = {}  # index -> (actor, its ping)
        self._missing: set[int] = set()  # dead slots of workers that never ran (elastic start)
        if config.elastic():
            self._await_first_workers()
        self.num_restarts = 0
        """Workers recreated so far in this run (a restored run continues the count)."""
        self._on_recreate: list[Callable[[Any], Any]] = []
        self._learner_group: LearnerGroup | None = None
        if config.num_learners:
            placement = (
                None
                if self._placement.first_learner_bundle is None
                else (self._placement.group, self._placement.first_learner_bundle)
            )
            self._learner_group = LearnerGroup(
                config, policy_cls, self._local, placement=placement, algorithm=algorithm
            )

    def _adopt(self, started: StartedWorkers) -> tuple[WorkerPlacement, list[Any]]:
        if started.config is not self.config or started.adopted or started.stopped:
            raise ConfigError(
                "WorkerSet(started=...): the workers were started for another config, or "
                "another WorkerSet owns them, or they were stopped; start them with this set's "
                "config"
            )
        started.adopted = True
        return started.placement, list(started.actors)

    def _await_first_workers(self) -> None:
        """The elastic start (class docstring): wait for the workers that can run now; leave
        the others starting, their slots holding absent actors."""
        config, placement = self.config, self._placement
        pings = {i: h.ping.remote() for i, h in enumerate(self._remote, start=1)}
        expected = max(config.workers_to_start(), placement.workers_that_fit)
        ready: set[int] = set()
        deadline = time.monotonic() + self.start_timeout_s
        while len(ready) < expected:
            left = [ref for i, ref in pings.items() if i not in ready]
            wait_s = max(0.0, deadline - time.monotonic())
            done, _ = flow.wait(
                left, num_returns=min(len(left), expected - len(ready)), timeout=wait_s
            )
            ready |= {i for i, ref in pings.items() if ref in done}
            if time.monotonic() >= deadline:
                break
        if len(ready) < config.workers_to_start():
            self._stop_remote()
            raise ConfigError(
                f"{type(config).__name__}: min_workers={config.min_workers} remote workers of "
                f"{config.worker_bundle()} each must start, but {len(ready)} of num_workers="
                f"{config.num_workers} did in {self.start_timeout_s:g} s (the Ray cluster has "
                f"{flow.cluster_resources()}, {flow.available_resources()} of them free): "
                "lower min_workers, or free or add nodes"
            )
        for index in sorted(set(pings) - ready):
            self._starting[index] = (self._remote[index - 1], pings[index])
            self._remote[index - 1] = flow.absent_actor(RolloutWorker)
            self._dead.add(index)
            self._missing.add(index)
        if self._missing:
            logger.warning(
                "started %d of num_workers=%d remote workers; workers %s start when a node "
                "with room for %s joins",
                len(ready),
                config.num_workers,
                sorted(self._missing),
                config.worker_bundle(),
            )
            placement.request_capacity()

    def placement_group(self) -> Any:
        """The placement group of the remote workers (worker i in bundle i - 1 of the set's own
        group, bundle i of an enclosing trial's group); None on the local backend, with no
        remote workers, or when they reserve nothing."""
        return self._placement.group

    def local_worker(self) -> RolloutWorker:
        """The learner: a plain object in this process. With ``num_learners`` >= 1 it holds
        the run's copy of the policies (learner 0's weights after every update; checkpoints,
        evaluation, weight broadcasts) while the `learner_group` trains."""
        return self._local

    def learner_group(self) -> LearnerGroup | None:
        """The data-parallel learner actors (``num_learners`` >= 1), or None: the local worker
        trains."""
        return self._learner_group

    def learner(self) -> RolloutWorker | LearnerGroup:
        """What trains: the `learner_group` when there is one, else the local worker (both
        have ``learn_on_batch(batch, num_sgd_iter=, sgd_minibatch_size=, policies=)``)."""
        return self._local if self._learner_group is None else self._learner_group

    def remote_workers(self) -> list[Any]:
        """Handles of the remote workers, in index order (index i is at position i - 1); a
        worker found dead and not recreated yet keeps its dead handle."""
        return list(self._remote)

    def healthy_workers(self) -> list[Any]:
        """Handles of the remote workers not known to be dead, in index order."""
        return [h for i, h in enumerate(self._remote, start=1) if i not in self._dead]

    def num_healthy_workers(self) -> int:
        """How many remote workers are not known to be dead (a failed call or ping marks a
        worker dead until it is recreated; an elastic run's missing workers are not healthy
        until they started)."""
        return len(self._remote) - len(self._dead)

    def num_target_workers(self) -> int:
        """How many remote workers the run asks for (``num_workers``), healthy or not."""
        return len(self._remote)

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
        """Push the local worker's weights to the remote workers (the healthy ones, or the
        handles in ``to``).

        The weights are stored once (``flow.put``) and the reference is passed to every
        ``set_weights`` call, with ``global_vars`` and the learner's
        ``num_grad_updates_per_policy`` (so the workers' rows record the weights' version).
        Non-blocking by default: each actor runs the call before any later call from this
        process, so the next sample uses the new weights. With
        ``blocking=True`` it waits, and a dead worker raises :class:`WorkerError` naming it.
        """
        targets = self.healthy_workers() if to is None else list(to)
        if not targets:
            return
        ref = flow.put(self._local.get_weights(policies))
        global_vars = self._with_versions(global_vars, policies)
        refs = [w.set_weights.remote(ref, global_vars) for w in targets]
        if blocking:
            for handle, r in zip(targets, refs, strict=True):
                self._get(r, handle)

    def sync_filters(self, *, to: Sequence[Any] | None = None, blocking: bool = False) -> None:
        """Send the local worker's observation filters to the remote workers (the healthy
        ones, or the handles in ``to``): each keeps its own delta on top
        (`RolloutWorker.sync_filters`). Stored once (``flow.put``); non-blocking unless
        ``blocking``. Nothing is sent when the run has no filters (``"NoFilter"``)."""
        if not self._local.filters:
            return
        targets = self.healthy_workers() if to is None else list(to)
        if not targets:
            return
        ref = flow.put(self._local.get_filters())
        refs = [w.sync_filters.remote(ref) for w in targets]
        if blocking:
            for handle, r in zip(targets, refs, strict=True):
                self._get(r, handle)

    def _with_versions(
        self, global_vars: Mapping[str, Any] | None, policies: Sequence[str] | None = None
    ) -> dict[str, Any]:
        versions = self._local.num_grad_updates_per_policy(policies)
        return {**(global_vars or {}), "num_grad_updates_per_policy": versions}

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

    def recreate_worker(
        self,
        index: int,
        *,
        dead: Any = None,
        error: BaseException | None = None,
        global_vars: Mapping[str, Any] | None = None,
    ) -> Any:
        """Replace the dead remote worker ``index`` (1..N) by a new actor with the same index
        and config; return its handle, or None while it cannot start.

        Once the new actor answers a ping it is sent the local worker's weights, observation
        filters and ``global_vars`` (before it samples), replaces the dead handle, and
        ``num_restarts`` grows by one. While other workers are healthy nobody waits: an actor
        still starting is kept and None returned (a later call hands it out once it answers);
        with none healthy it waits up to ``start_timeout_s``. Asked again about the same
        ``dead`` handle it returns the handle that replaced it, counting nothing.

        Raises :class:`WorkerError` naming the worker when ``recreate_failed_workers`` is False
        or ``max_worker_restarts`` restarts were made (``error`` is the death being answered).
        A missing worker of an elastic run (class docstring) is started, not recreated: neither
        rule applies and ``num_restarts`` stays.
        """
        check_int(index, "WorkerSet.recreate_worker: index", low=1, high=len(self._remote))
        current = self._remote[index - 1]
        if dead is not None and not (current is dead or current == dead):
            return current  # already replaced
        self._dead.add(index)
        if index not in self._missing:
            self._check_may_recreate(index, error)
        starting = self._starting.pop(index, None)
        actor, ping = starting if starting is not None else self._begin_start(index, current)
        if not self._started(index, actor, ping):
            return None
        return self._install(index, actor, global_vars)

    def _started(self, index: int, actor: Any, ping: Any) -> bool:
        # Nobody waits for a start while other workers can sample: the run goes on without it.
        timeout = 0.0 if self.healthy_workers() else self.start_timeout_s
        ready, _ = flow.wait([ping], num_returns=1, timeout=timeout)
        if not ready:
            self._starting[index] = (actor, ping)
            logger.info("rollout worker %d: its replacement has not started yet", index)
            self._placement.request_capacity()
            return False
        try:
            flow.get(ping)
        except WorkerError:
            logger.warning("rollout worker %d: its replacement died while starting", index)
            return False
        return True

    def grow(self, global_vars: Mapping[str, Any] | None = None) -> list[int]:
        """Install the remote workers whose start finished since the last look (an elastic
        run's missing ones on a node that joined, a dead one's replacement) and begin a start
        for a missing one whose start failed; never waits. Returns the indexes installed.

        Each new worker gets the local worker's weights, observation filters and
        ``global_vars`` before it samples (as in :meth:`recreate_worker`); a replacement counts
        in ``num_restarts``, a missing worker's first start does not. A dead worker whose
        replacement is not being started is left to whoever found it dead
        (:meth:`recreate_worker`, which checks that recreation is allowed)."""
        installed = []
        for index in sorted(self._dead):
            starting = self._starting.pop(index, None)
            if starting is None and index in self._missing:
                starting = self._begin_start(index, self._remote[index - 1])
            if starting is None:
                continue
            actor, ping = starting
            ready, _ = flow.wait([ping], num_returns=1, timeout=0)
            if not ready:
                self._starting[index] = starting
                continue
            try:
                flow.get(ping)
            except WorkerError:
                logger.warning("rollout worker %d died while starting", index)
                continue
            self._install(index, actor, global_vars)
            installed.append(index)
        return installed

    def on_recreate(self, fn: Callable[[Any], Any]) -> None:
        """Call ``fn(handle)`` for each recreated worker (and each of an elastic run's workers
        that starts late), after its weights were sent and before its handle is handed out:
        for state a plan keeps on its workers (e.g. MAML's tasks)."""
        self._on_recreate.append(check_callable(fn, "WorkerSet.on_recreate(fn)"))

    def _check_may_recreate(self, index: int, error: BaseException | None) -> None:
        config = self.config
        if not config.recreate_failed_workers:
            rule = "recreate_failed_workers=False"
        elif self.num_restarts >= config.max_worker_restarts:
            rule = f"max_worker_restarts={config.max_worker_restarts} restarts were made"
        else:
            return
        err = WorkerError(
            f"rollout worker(s) [{index}] of {len(self._remote)} died or are unreachable (index "
            f"0 is the local learner) and {rule}: {error}. Check the workers' logs (out of "
            "memory, an env that crashed the process) and restart the run."
        )
        for note in getattr(error, "__notes__", ()):
            err.add_note(note)
        raise err

    def _begin_start(self, index: int, dead: Any) -> tuple[Any, Any]:
        try:
            flow.kill(dead)  # unreachable is not always gone: make sure two never sample
        except Exception:  # a dead actor may refuse even this
            logger.debug("could not kill %r", dead, exc_info=True)
        actor = self._placement.start(index, self.policy_cls)
        return actor, actor.ping.remote()

    def _install(self, index: int, actor: Any, global_vars: Mapping[str, Any] | None) -> Any:
        weights = flow.put(self._local.get_weights())
        actor.set_weights.remote(weights, self._with_versions(global_vars))
        self.sync_filters(to=[actor])
        for fn in self._on_recreate:
            fn(actor)
        self._remote[index - 1] = actor
        self._dead.discard(index)
        if index in self._missing:
            self._missing.discard(index)
            logger.warning(
                "rollout worker %d started: %d of %d remote workers healthy",
                index,
                self.num_healthy_workers(),
                len(self._remote),
            )
            return actor
        self.num_restarts += 1
        logger.warning("rollout worker %d recreated (restart %d)", index, self.num_restarts)
        return actor

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
        """Close the local worker's envs and kill the remote actors and the learner actors
        (with ``output``, each remote worker first writes its buffered rows)."""
        if self.config.output is not None:
            self._flush_remote_output()
        self._local.stop()
        if self._learner_group is not None:
            self._learner_group.stop()
        self._stop_remote()

    def _flush_remote_output(self, timeout_s: float = 60.0) -> None:
        """Ask every healthy remote worker to write its buffered output rows; a worker that
        fails or takes longer than ``timeout_s`` loses them (logged), the others do not."""
        calls = [(h, h.flush_output.remote()) for h in self.healthy_workers()]
        for handle, ref in calls:
            try:
                flow.get(ref, timeout=timeout_s)
            except (WorkerError, TimeoutError, OSError, OfflineDataError) as err:
                logger.warning(
                    "rollout worker %d did not write its last output rows: %s",
                    self.worker_index(handle),
                    err,
                )

    def _stop_remote(self) -> None:
        for handle in [*self._remote, *(actor for actor, _ in self._starting.values())]:
            try:
                flow.kill(handle)
            except Exception:
                logger.debug("could not kill %r", handle, exc_info=True)
        self._remote, self._starting, self._dead, self._missing = [], {}, set(), set()
        self._placement.remove()  # frees the set's own reservation, once

    def __repr__(self) -> str:
        return f"WorkerSet(local=1, remote={len(self._remote)})"

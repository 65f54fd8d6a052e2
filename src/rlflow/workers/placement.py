"""Where a `WorkerSet`'s remote actors run, and remote rollout workers started before the rest
of a run.

- `WorkerPlacement`: the reservation of a set's actors (one placement group: remote worker i in
  bundle ``first_bundle + i - 1``, the learner actors after them) and the creation of remote
  worker i in its bundle, at the start and when a dead worker is recreated. An elastic run
  (``min_workers`` < ``num_workers``) reserves no bundles for its workers: each reserves its
  own resources as it starts, and the autoscaler is asked for the ones missing
  (`WorkerPlacement.request_capacity`).
- `start_remote_workers`: the remote rollout workers of a config, started before the driver
  imports torch, the policies and the operators (about 1.2 s on a 2-core machine): their
  processes import the same meanwhile. A `WorkerSet` given the result (``started=``) adopts
  them. The command line does this when it connects to a running Ray (``--address``).

Nothing here imports torch: the policy class may be given as ``"module:Class"`` and is imported
by each worker (`RolloutWorker`).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlflow import flow
from rlflow.config import AlgorithmConfig
from rlflow.config.resources import bundles_that_fit, check_cluster_fits, check_gpus
from rlflow.errors import ConfigError
from rlflow.workers.rollout_worker import RolloutWorker

__all__ = ["StartedWorkers", "WorkerPlacement", "check_remote_gpus", "start_remote_workers"]

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0
"""How long a placement group may take to be placed, by default (seconds)."""


class WorkerPlacement:
    """The reservation of a `WorkerSet`'s remote rollout workers and learner actors, and the
    start of remote worker i in its bundle.

    Remote workers reserve ``num_cpus_per_worker``, ``num_gpus_per_worker`` and
    ``custom_resources_per_worker``; on Ray the reservations are one placement group
    (``placement_strategy``) placed within ``timeout_s`` (else `ConfigError`): bundle i - 1 for
    worker i, then the learner actors' bundles (``num_learners``). Inside a placement group of
    ``1 + num_workers + num_learners`` bundles (a Ray Tune trial, whose bundle 0 holds the
    learner) its bundles are used instead and none is created. No group with nothing reserved,
    or on the local backend. An elastic run (``min_workers`` < ``num_workers``, outside such a
    trial) puts only the learners' bundles in a group: its workers reserve their resources one
    by one, each placed by Ray when a node has them (``placement_strategy`` SPREAD: Ray's SPREAD
    scheduling), so that some can run before all fit.

    Args:
        config: the run's config.
        timeout_s: how long the group may take to be placed (seconds).
    """

    def __init__(self, config: AlgorithmConfig, *, timeout_s: float = START_TIMEOUT_S) -> None:
        """Check the cluster, then reserve the group (waiting up to
        ``cluster_wait_s`` for the cluster to grow, logging every 10 s)."""
        self.config = config
        self.first_bundle = 0
        """The bundle of remote worker 1."""
        self.first_learner_bundle: int | None = None
        """The bundle of the first learner actor, when the learners reserve one."""
        self.workers_in_group = False
        """Whether the remote workers have bundles in `group` (else each reserves its own)."""
        self._release: Any = None  # a weakref.finalize that removes this placement's own group
        self._requested = False  # whether request_capacity asked the autoscaler
        self._actor_cls = flow.remote(RolloutWorker).options(**self._actor_options(config))
        self.group: Any = self._reserve(config, timeout_s)
        """The placement group (None: none, see the class docstring)."""
        self.workers_that_fit = self._workers_that_fit(config)
        """How many of the remote workers the cluster's free resources held once the group was
        placed, before any worker started (at most ``num_workers``): what an elastic run waits
        for (an estimate: Ray's free resources summed over the nodes, as it last heard)."""

    @staticmethod
    def _actor_options(config: AlgorithmConfig) -> dict[str, Any]:
        options: dict[str, Any] = {
            "num_cpus": config.num_cpus_per_worker,
            "num_gpus": config.num_gpus_per_worker,
        }
        if config.custom_resources_per_worker:
            options["resources"] = dict(config.custom_resources_per_worker)
        if config.elastic() and config.placement_strategy == "SPREAD":
            options["scheduling_strategy"] = "SPREAD"  # a bundle's placement overrides it
        return options

    def _reserve(self, config: AlgorithmConfig, timeout_s: float) -> Any:
        bundle, learner = config.worker_bundle(), config.learner_bundle()
        workers = config.num_workers if bundle else 0
        learners = config.num_learners if learner else 0
        if not workers and not learners:
            return None
        enclosing = flow.current_placement_group()
        if enclosing is not None and enclosing.num_bundles == 1 + workers + learners:
            self.first_bundle = 1  # bundle 0 is the driver's learner (this process)
            self.first_learner_bundle = 1 + workers if learners else None
            self.workers_in_group = bool(workers)
            return enclosing.group
        _wait_for_cluster(config, self.request_capacity)
        if config.elastic():
            workers = 0  # a group is placed whole or not at all: each worker reserves its own
        if not workers and not learners:
            return None
        self.workers_in_group = bool(workers)
        self.first_learner_bundle = workers if learners else None
        bundles = [dict(bundle) for _ in range(workers)] + [dict(learner)] * learners
        group = flow.placement_group(bundles, config.placement_strategy, timeout_s=timeout_s)
        release = weakref.finalize(self, flow.remove_placement_group, group)
        release.atexit = False  # at exit Ray frees it with the job
        self._release = release
        return group

    def _workers_that_fit(self, config: AlgorithmConfig) -> int:
        bundle = config.worker_bundle()
        if not config.elastic() or self.workers_in_group or not bundle:
            return config.num_workers  # all of them: the backend is not asked
        free = flow.available_resources()
        if free is None:
            return config.num_workers
        return min(config.num_workers, bundles_that_fit(bundle, [free], "PACK"))

    def start(self, index: int, policy: type | str) -> Any:
        """Create remote rollout worker ``index`` (1..N) in its bundle (an elastic run's: where
        Ray finds its resources, or queued until a node has them), building ``policy`` (a class
        or ``"module:Class"``); returns its handle at once."""
        group = self.group if self.workers_in_group else None
        actor_cls = self._actor_cls.options(
            **flow.bundle_options(group, self.first_bundle + index - 1)
        )
        return actor_cls.remote(self.config, policy, worker_index=index)

    def bundles(self) -> list[dict[str, float]]:
        """The resources of the whole run's actors: one bundle per remote worker
        (``num_workers``), then one per learner actor; those that reserve nothing left out."""
        config = self.config
        worker, learner = config.worker_bundle(), config.learner_bundle()
        workers = [dict(worker) for _ in range(config.num_workers)] if worker else []
        return workers + ([dict(learner) for _ in range(config.num_learners)] if learner else [])

    def request_capacity(self) -> None:
        """Ask Ray's autoscaler for a cluster that holds all of `bundles` (once: the request
        stands until `remove`, which withdraws it), when the run is short of room: its workers
        wait for nodes. A fixed cluster ignores it."""
        if self._requested or flow.backend_name() == "local":
            return
        bundles = self.bundles()
        if bundles:
            logger.info("asking Ray's autoscaler for room for %d bundles", len(bundles))
            flow.request_resources(bundles)
            self._requested = True

    def remove(self) -> None:
        """Remove the placement group if this placement created it (once; an enclosing one
        stays with its owner), and withdraw the request of `request_capacity`."""
        if self._release is not None:
            self._release()
        if self._requested:
            self._requested = False
            try:
                flow.request_resources([])
            except Exception:  # a session going down takes the request with it
                logger.debug("could not withdraw the autoscaler request", exc_info=True)


def check_remote_gpus(config: AlgorithmConfig) -> None:
    """`check_gpus` of ``config`` against the Ray cluster's GPUs; without a backend yet (whose
    absence is reported when remote workers start) the GPUs are checked as in-process ones."""
    resources = flow.cluster_resources() if flow.is_initialized() else None
    check_gpus(config, cluster_gpus=None if resources is None else resources.get("GPU", 0.0))


def _wait_for_cluster(config: AlgorithmConfig, request_capacity: Callable[[], None]) -> None:
    """Refuse at once a run the cluster's nodes cannot hold (`check_cluster_fits`: the
    workers it starts with), or with ``cluster_wait_s`` ask the autoscaler for room
    (``request_capacity``) and wait that long for the cluster to grow, logging every 10 s."""
    start, next_log = time.monotonic(), 0.0
    while True:
        nodes = flow.cluster_nodes()
        if nodes is None:  # the local backend: everything runs in this process
            return
        waited = time.monotonic() - start
        try:
            check_cluster_fits(config, nodes)
            return
        except ConfigError:
            if waited >= config.cluster_wait_s:
                raise
        request_capacity()
        if waited >= next_log:
            logger.warning(
                "waiting for the Ray cluster to hold %d workers of %s (%.0f of %g s, "
                "cluster_wait_s)",
                config.workers_to_start(),
                config.worker_bundle(),
                waited,
                config.cluster_wait_s,
            )
            next_log += 10.0
        time.sleep(1.0)


@dataclass
class StartedWorkers:
    """Remote rollout workers started by `start_remote_workers`, for a `WorkerSet` to adopt
    (``WorkerSet(..., started=...)``); until then `stop` kills them and frees their group."""

    config: AlgorithmConfig
    """The config they were started with; the adopting set's must be this one."""
    placement: WorkerPlacement
    """Their reservation."""
    actors: Sequence[Any]
    """Their handles, worker 1 first."""
    adopted: bool = False
    """Whether a `WorkerSet` owns them now."""
    stopped: bool = False
    """Whether `stop` killed them (no `WorkerSet` may adopt them then)."""

    def stop(self) -> None:
        """Kill the actors and free the group, unless a `WorkerSet` adopted them (then it
        stops them); a second call does nothing."""
        if self.adopted or self.stopped:
            return
        self.stopped = True
        for handle in self.actors:
            try:
                flow.kill(handle)
            except Exception:
                logger.debug("could not kill %r", handle, exc_info=True)
        self.placement.remove()


def start_remote_workers(
    config: AlgorithmConfig, policy: type | str, *, timeout_s: float = START_TIMEOUT_S
) -> StartedWorkers:
    """Reserve the placement of ``config``'s `WorkerSet` and start its ``num_workers`` remote
    rollout workers, each building ``policy`` (a class, or ``"module:Class"``, imported by the
    workers only), without importing torch here.

    Raises `ConfigError` as `WorkerSet` would (GPUs, a cluster too small, a group not placed
    within ``timeout_s``). The workers' own errors (an env that cannot be built) come from their
    first call, after the `WorkerSet` that adopts them has built its local worker, which
    checks the same env and raises first.
    """
    check_remote_gpus(config)
    placement = WorkerPlacement(config, timeout_s=timeout_s)
    actors = [placement.start(i, policy) for i in range(1, config.num_workers + 1)]
    return StartedWorkers(config, placement, actors)

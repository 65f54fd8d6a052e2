"""The learner thread: trains the local worker beside the plan (IMPALA, APPO, Ape-X).

- :class:`LearnerThread` trains the local worker in a daemon thread, fed and drained through
  bounded queues (:class:`~rlflow.ops.concurrency.Enqueue` /
  :func:`~rlflow.ops.concurrency.dequeue`). If it crashes, :meth:`LearnerThread.check` (the
  ``check`` of ``dequeue``) re-raises the thread's original exception in the plan, with a note
  saying where it came from.
- :class:`RecordStepsTrained` counts what the learner thread trained (it trains outside the
  plan, so the plan's counters learn of it here).
- :func:`stop_learner_threads` stops the threads of a local worker (`rlflow.Trainer.stop`);
  :func:`stop_all_learner_threads` stops every one in the process (at interpreter exit, and
  after each test); :func:`learners_paused` holds their locks (the trainer acts and exports
  under it).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import queue
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from rlflow import flow
from rlflow.checks import check_int
from rlflow.data.refs import BatchRef, BatchRefs
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError, PlanError
from rlflow.flow import ActorItem, TimerStat
from rlflow.ops import keys
from rlflow.ops.learner_info import record_learner_info
from rlflow.ops.train import TrainResult
from rlflow.policy.policy import weights_to_host
from rlflow.workers import RolloutWorker, WorkerSet
from rlflow.workers.learner_group import LearnerGroup

__all__ = [
    "LearnerThread",
    "LearnerWeights",
    "RecordStepsTrained",
    "learners_paused",
    "stop_all_learner_threads",
    "stop_learner_threads",
]

logger = logging.getLogger(__name__)


_QUEUE_POLL_S = 0.1
"""How long the learner thread blocks on a queue before it looks at its stop flag."""


_LIVE_LEARNERS: weakref.WeakSet[LearnerThread] = weakref.WeakSet()


def stop_all_learner_threads(timeout_s: float = 2.0) -> int:
    """Stop every running `LearnerThread` of this process, whatever it trains; return how many.

    Runs at interpreter exit (a daemon thread killed inside torch would abort the process); the
    test suite calls it after each test, so no learner thread a test left running trains on into
    the next one.
    """
    running = 0
    for learner in list(_LIVE_LEARNERS):  # a crashed one's loader thread may still run
        running += learner.is_alive() or learner._loader.is_alive()
        learner.stop(timeout_s=timeout_s)
    return running


atexit.register(stop_all_learner_threads)


def stop_learner_threads(local_worker: Any, timeout_s: float = 5.0) -> int:
    """Stop every running `LearnerThread` that trains ``local_worker``; return how many.

    `rlflow.Trainer.stop` calls it, so a stopped IMPALA/APPO/Ape-X run leaves no thread behind.
    """
    mine = [t for t in list(_LIVE_LEARNERS) if t.local_worker is local_worker and t.is_alive()]
    for learner in mine:
        learner.stop(timeout_s=timeout_s)
    return len(mine)


@contextlib.contextmanager
def learners_paused(local_worker: Any) -> Iterator[None]:
    """Hold the lock of every running `LearnerThread` that trains ``local_worker``: inside, no
    update changes its weights (a thread finishes the batch it is learning first). Not
    reentrant."""
    mine = [t for t in list(_LIVE_LEARNERS) if t.local_worker is local_worker and t.is_alive()]
    with contextlib.ExitStack() as stack:
        for learner in mine:
            stack.enter_context(learner.lock)
        yield


class LearnerThread(threading.Thread):
    """Trains the learner on batches from a bounded queue, in a daemon thread.

    Args:
        learner: what trains, ``workers.learner()``: the local worker, or the learner actors
            (``num_learners`` >= 1, `rlflow.workers.learner_group.LearnerGroup`), which train in
            its place and hand learner 0's weights to the local worker after each batch (under
            :attr:`lock`); the thread calls its ``learn_on_batch``.
        inqueue_size: capacity of :attr:`inqueue` (batches waiting to be learned), >= 1.
        outqueue_size: capacity of :attr:`outqueue` (results waiting to be read), >= 1; the
            thread waits when it is full.
        num_sgd_iter: passes over each batch, >= 1 (passed to ``learn_on_batch``).
        sgd_minibatch_size: rows per SGD step, >= 0 (0: the whole batch per step).
        policies: ids of the policies to train (None: all of the local worker's).
        prefetch: stage the next batch on the learner's device while the current one trains
            (a loader thread takes a batch from :attr:`inqueue` as soon as the learner took the
            last staged one and sends it with ``PolicyUpdate.stage``: one batch waits staged,
            besides the queue's); None (default): when a trained policy of the local worker is
            on an accelerator. Without it the learner converts each batch itself. Off with
            learner actors (they fetch their batches themselves).

    Input (``inqueue``): a ``SampleBatch`` / ``MultiAgentBatch`` or a reference to one
    (`rlflow.data.refs.BatchRef`, `BatchRefs`: passed on to learner actors, fetched here
    otherwise: :attr:`takes_references` says which the learner prefers), or an
    ``ActorItem(actor, batch)`` (from ``zip_with_source_actor``: e.g. the replay shard the
    batch came from).
    Output (``outqueue``): a :class:`~rlflow.ops.TrainResult` per batch, wrapped as
    ``ActorItem(actor, result)`` when the input was. Feed it with :class:`Enqueue`, read it
    with ``dequeue(learner.outqueue, check=learner.check)``. Start it with :meth:`start`; stop
    it with :meth:`stop`.

    Side effects: the local worker's weights (under :attr:`lock`; take the lock to read
    consistent weights from another thread); :attr:`weights_updated` is set after every
    update (a reader of the weights clears it). The plan's counters are not touched (the thread
    has no plan context): count with :class:`RecordStepsTrained`.

    If ``learn_on_batch`` raises, the thread stops and keeps the exception; :meth:`check`
    re-raises that same exception (type, message, traceback) with a note naming the thread.
    """

    def __init__(
        self,
        learner: RolloutWorker | LearnerGroup,
        *,
        inqueue_size: int = 16,
        outqueue_size: int = 64,
        num_sgd_iter: int = 1,
        sgd_minibatch_size: int = 0,
        policies: Sequence[str] | None = None,
        prefetch: bool | None = None,
    ) -> None:
        """Create the queues; the thread starts with :meth:`start`."""
        super().__init__(name="rlflow-learner", daemon=True)
        self.learner = learner
        """What trains (``workers.learner()``)."""
        self.takes_references = isinstance(learner, LearnerGroup)
        """Whether the learner fetches its batches itself (learner actors): a plan then feeds
        it references (``parallel_rollouts(by_reference=...)``, ``replay(by_reference=...)``),
        so the batches never pass through the driver."""
        self.local_worker: RolloutWorker = (
            learner.local_worker if isinstance(learner, LearnerGroup) else learner
        )
        """The driver's learner worker, whose weights change (the run's copy)."""
        local_worker = self.local_worker
        self.policies = None if policies is None else list(policies)
        for pid in self.policies or ():
            local_worker.get_policy(pid)  # ConfigError naming the known ids if unknown
        self.num_sgd_iter = check_int(num_sgd_iter, "LearnerThread: num_sgd_iter", low=1)
        if (
            isinstance(sgd_minibatch_size, bool)
            or not isinstance(sgd_minibatch_size, int)
            or sgd_minibatch_size < 0
        ):
            raise ConfigError(
                f"LearnerThread(sgd_minibatch_size)={sgd_minibatch_size!r} must be an int >= 0"
            )
        self.sgd_minibatch_size = sgd_minibatch_size
        self.inqueue: queue.Queue[Any] = queue.Queue(
            maxsize=check_int(inqueue_size, "LearnerThread: inqueue_size", low=1)
        )
        self.outqueue: queue.Queue[Any] = queue.Queue(
            maxsize=check_int(outqueue_size, "LearnerThread: outqueue_size", low=1)
        )
        self.lock = threading.Lock()
        """Held while the weights change."""
        self.weights_updated = False
        """True once the weights changed since a reader last cleared it."""
        self.error: BaseException | None = None
        """The exception that stopped the thread, if any."""
        self.queue_wait_timer = TimerStat()
        """Time spent waiting for a batch (per batch)."""
        self.learn_timer = TimerStat()
        """Time in ``learn_on_batch`` (units: env steps)."""
        self.num_batches = 0
        """Batches learned so far."""
        self._inqueue_sizes: collections.deque[int] = collections.deque(maxlen=100)
        self._stopping = threading.Event()
        if self.takes_references:
            prefetch = False  # the learner actors read the batch from the object store
        if prefetch is None:
            pids = self.policies or list(getattr(local_worker, "policy_map", ()))
            devices = {getattr(local_worker.get_policy(p), "device", None) for p in pids}
            prefetch = any(d is not None and d.type != "cpu" for d in devices)
        self.prefetch = bool(prefetch)
        """Whether a loader thread stages the next batch while one trains (see Args)."""
        self._staged: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._staging_slot = threading.Semaphore(1)  # free once the staged batch was taken
        self._loader = threading.Thread(
            target=self._load_loop, name="rlflow-learner-loader", daemon=True
        )

    def run(self) -> None:
        """The thread's loop: :meth:`step` until stopped or until ``learn_on_batch`` raises."""
        try:
            while not self._stopping.is_set():
                self.step()
        except BaseException as err:  # kept, re-raised by check()
            err.add_note(
                f"rlflow: raised in {self.name} (LearnerThread) while training the local "
                "worker; the learner thread has stopped"
            )
            self.error = err
            logger.debug("learner thread crashed", exc_info=True)

    def _take(self) -> tuple[Any, SampleBatch | MultiAgentBatch] | None:
        """``(actor or None, batch)`` from :attr:`inqueue` if one arrives within the poll time."""
        try:
            item = self.inqueue.get(timeout=_QUEUE_POLL_S)
        except queue.Empty:
            return None
        self._inqueue_sizes.append(self.inqueue.qsize())
        actor, batch = (item.actor, item.item) if isinstance(item, ActorItem) else (None, item)
        if isinstance(batch, BatchRef | BatchRefs):
            if not self.takes_references:  # the local worker trains: fetch it here
                batch = batch.resolve()
            return actor, batch
        if not isinstance(batch, SampleBatch | MultiAgentBatch):
            raise PlanError(f"LearnerThread takes SampleBatch or MultiAgentBatch, got {batch!r}")
        return actor, batch

    def _load_loop(self) -> None:
        """The loader thread (with ``prefetch``): stage each batch, hand it to the learner."""
        try:
            while not self._stopping.is_set():
                if not self._staging_slot.acquire(timeout=_QUEUE_POLL_S):
                    continue
                taken = self._take()
                if taken is None:
                    self._staging_slot.release()
                    continue
                actor, batch = taken
                staged = self.local_worker.stage_batch(batch, self.policies)
                self._put(self._staged, (actor, staged))
        except BaseException as err:  # noqa: BLE001 (kept; check() re-raises it)
            err.add_note(f"rlflow: raised in {self._loader.name} while staging a batch")
            self.error = err
            self._stopping.set()

    def _put(self, target: queue.Queue[Any], item: Any) -> None:
        """Put ``item`` into ``target``, waiting while it is full, until stopped."""
        while not self._stopping.is_set():
            try:
                target.put(item, timeout=_QUEUE_POLL_S)
                return
            except queue.Full:
                continue

    def step(self) -> bool:
        """Learn on one batch from :attr:`inqueue` (or, with ``prefetch``, the one the loader
        staged) if one arrives soon; return whether one did.

        Blocks at most about 0.1 s for a batch, and while :attr:`outqueue` is full.
        """
        start = time.perf_counter()
        if self.prefetch:
            try:
                taken = self._staged.get(timeout=_QUEUE_POLL_S)
            except queue.Empty:
                return False
            self._staging_slot.release()  # the loader may take and stage the next one
        else:
            taken = self._take()
            if taken is None:
                return False
        self.queue_wait_timer.push(time.perf_counter() - start)
        actor, batch = taken
        with self.learn_timer.timing(units=batch.env_steps()), self.lock:
            stats = self._learn(batch)
            self.weights_updated = True
        self.num_batches += 1
        result = TrainResult(batch.env_steps(), stats)
        self._put(self.outqueue, result if actor is None else ActorItem(actor, result))
        return True

    def _learn(self, batch: SampleBatch | MultiAgentBatch) -> Any:
        options: dict[str, Any] = {}
        if self.num_sgd_iter != 1 or self.sgd_minibatch_size != 0:
            options.update(
                num_sgd_iter=self.num_sgd_iter, sgd_minibatch_size=self.sgd_minibatch_size
            )
        if self.policies is not None:
            options["policies"] = self.policies
        return self.learner.learn_on_batch(batch, **options)

    def check(self) -> bool:
        """True while the thread runs; False once it stopped normally (or never started).

        If the thread crashed, re-raises its original exception instead (for ``dequeue``).
        """
        if self.error is not None:
            raise self.error
        return self.is_alive()

    def start(self) -> None:
        """Start the thread; it is stopped at interpreter exit if nobody stopped it before
        (a daemon thread killed inside torch would abort the process)."""
        super().start()
        if self.prefetch:
            self._loader.start()
        _LIVE_LEARNERS.add(self)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the thread to stop and wait up to ``timeout_s`` for it."""
        self._stopping.set()
        if self.is_alive():
            self.join(timeout_s)
        if self._loader.is_alive():
            self._loader.join(timeout_s)

    def stats(self) -> dict[str, float]:
        """Queue and timing statistics: ``inqueue_size_mean``, ``outqueue_size``,
        ``queue_wait_ms``, ``learn_ms``, ``learn_throughput`` (env steps/s), ``num_batches``."""
        sizes = self._inqueue_sizes
        return {
            "inqueue_size_mean": sum(sizes) / len(sizes) if sizes else 0.0,
            "outqueue_size": float(self.outqueue.qsize()),
            "queue_wait_ms": self.queue_wait_timer.mean_s * 1000.0,
            "learn_ms": self.learn_timer.mean_s * 1000.0,
            "learn_throughput": self.learn_timer.mean_throughput,
            "num_batches": float(self.num_batches),
        }


def _unwrap_result(item: Any, where: str) -> TrainResult:
    result = item.item if isinstance(item, ActorItem) else item
    if not isinstance(result, TrainResult):
        raise PlanError(f"{where} takes TrainResult items (or ActorItem of one), got {item!r}")
    return result


class RecordStepsTrained:
    """Count the env steps a learner thread trained on, in the plan's context.

    Items: ``TrainResult`` (or ``ActorItem(actor, TrainResult)``) ``-> the same item``. Use with
    ``.for_each`` right after ``dequeue(learner.outqueue)``. Side effects: counters
    ``num_env_steps_trained``, ``num_agent_steps_trained``, ``num_train_steps``;
    ``info["learner"]`` = the result's stats; with ``learner``, ``info["learner_thread"]`` =
    :meth:`LearnerThread.stats`.

    >>> from rlflow import flow
    >>> from rlflow.ops import TrainResult
    >>> out = flow.from_iterable([TrainResult(32, {})]).for_each(RecordStepsTrained())
    >>> out.take(1), out.metrics.counters["num_env_steps_trained"]
    ([TrainResult(env_steps=32, stats={})], 32)
    """

    def __init__(self, *, learner: LearnerThread | None = None) -> None:
        """Keep the learner thread whose statistics go into ``info``, if any."""
        if learner is not None and not isinstance(learner, LearnerThread):
            raise ConfigError(f"RecordStepsTrained(learner={learner!r}) must be a LearnerThread")
        self.learner = learner

    def __call__(self, item: Any) -> Any:
        result = _unwrap_result(item, "RecordStepsTrained")
        ctx = flow.current_metrics()
        ctx.counters[keys.NUM_ENV_STEPS_TRAINED] += result.env_steps
        ctx.counters[keys.NUM_AGENT_STEPS_TRAINED] += result.env_steps
        ctx.counters[keys.NUM_TRAIN_STEPS] += 1
        record_learner_info(result.stats)
        if self.learner is not None:
            ctx.info[keys.LEARNER_THREAD_INFO] = self.learner.stats()
        return item


class LearnerWeights:
    """The learner's weights stored once (``flow.put``) with their versions, for pushing to
    one worker at a time (IMPALA's and Ape-X's weight operators).

    :meth:`refresh` stores them again: with a ``learner`` thread, a snapshot on the learner's
    device (``weights_snapshot``) and the versions are taken under its lock and its
    ``weights_updated`` flag is cleared; the snapshot goes to the host after the lock is let
    go. :meth:`send` pushes the stored weights to one worker (fire-and-forget ``set_weights``)
    with ``{"timestep": env steps sampled, "num_grad_updates_per_policy": the stored weights'
    versions}``.
    """

    def __init__(self, workers: WorkerSet, learner: LearnerThread | None = None) -> None:
        """Keep the worker set whose local worker is the learner, and its thread (if any)."""
        self.workers = workers
        self.learner = learner
        self.ref: Any = None
        """The stored weights (None before the first :meth:`refresh`)."""
        self.versions: dict[str, int] = {}
        """``num_grad_updates`` per policy of the stored weights."""

    @property
    def changed(self) -> bool:
        """Whether the learner may have updated since the last :meth:`refresh`: never stored,
        the learner thread's flag set, or no learner thread to tell."""
        return self.ref is None or self.learner is None or self.learner.weights_updated

    def refresh(self) -> None:
        """Store the learner's current weights."""
        local = self.workers.local_worker()
        if self.learner is None:
            weights, self.versions = local.get_weights(), local.num_grad_updates_per_policy()
        else:
            # Under the lock only a copy on the learner's device; to the host outside it.
            with self.learner.lock:
                snapshot = local.weights_snapshot()
                self.versions = local.num_grad_updates_per_policy()
                self.learner.weights_updated = False
            weights = {pid: weights_to_host(w) for pid, w in snapshot.items()}
        self.ref = flow.put(weights)

    def send(self, actor: Any) -> None:
        """Push the stored weights to ``actor`` with the global vars."""
        global_vars = {
            "timestep": flow.current_metrics().counters[keys.NUM_ENV_STEPS_SAMPLED],
            "num_grad_updates_per_policy": self.versions,
        }
        actor.set_weights.remote(self.ref, global_vars)

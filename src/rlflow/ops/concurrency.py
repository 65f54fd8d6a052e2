"""Concurrency operators: run sub-flows side by side, and hand work to a learner thread.

- :func:`concurrently` mixes several sub-flows into one stream (round robin, optionally
  weighted, or async), keeping only the outputs of some of them; the others still run for their
  side effects (storing to a replay buffer, pushing weights).
- :class:`Enqueue` / :func:`dequeue` connect a plan to a :class:`LearnerThread` through bounded
  queues without ever blocking the plan: a full or empty queue answers ``NOT_READY`` and the
  plan's waiter polls it again with back-off (no busy spinning).
- :class:`LearnerThread` trains the local worker in a daemon thread (IMPALA, Ape-X). If it
  crashes, :meth:`LearnerThread.check` (the ``check`` of :func:`dequeue`) re-raises the thread's
  original exception in the plan, with a note saying where it came from.
- :class:`RecordStepsTrained` counts what the learner thread trained (it trains outside the
  plan) and :class:`UpdateWorkerWeights` sends its weights to the workers, one at a time (Ape-X).
"""

from __future__ import annotations

import atexit
import collections
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, NamedTuple

from rlflow import flow
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError, PlanError, WorkerError
from rlflow.flow import NOT_READY, ActorItem, LocalIterator, TimerStat
from rlflow.ops import keys
from rlflow.ops.train import TrainResult
from rlflow.workers import RolloutWorker, WorkerSet

__all__ = [
    "Enqueue",
    "LearnerThread",
    "RecordStepsTrained",
    "Tagged",
    "UpdateWorkerWeights",
    "concurrently",
    "dequeue",
    "stop_learner_threads",
]

logger = logging.getLogger(__name__)

ConcurrencyMode = Literal["round_robin", "async"]
_MODES = ("round_robin", "async")


# ------------------------------------------------------------------------------ concurrently
class Tagged(NamedTuple):
    """An item of :func:`concurrently`'s merged stream, tagged with the index of its sub-flow."""

    op_index: int
    """Position of the op in ``concurrently``'s list."""
    item: Any
    """The op's item."""


class _Tag:
    def __init__(self, index: int) -> None:
        self.index = index

    def __call__(self, item: Any) -> Tagged:
        return Tagged(self.index, item)


class _KeepIndexes:
    def __init__(self, indexes: frozenset[int]) -> None:
        self.indexes = indexes

    def __call__(self, tagged: Tagged) -> bool:
        return tagged.op_index in self.indexes


def _untag(tagged: Tagged) -> Any:
    return tagged.item


def _check_weights(weights: Sequence[float | str], num_ops: int) -> list[float | str]:
    out = list(weights)
    if len(out) != num_ops:
        raise ConfigError(
            f"concurrently(round_robin_weights={out!r}) has {len(out)} weights for {num_ops} "
            "ops; give one per op"
        )
    for w in out:
        if w != "*" and (isinstance(w, bool) or not isinstance(w, int | float) or not w > 0):
            raise ConfigError(
                f"concurrently(round_robin_weights={out!r}): each weight must be a number > 0 "
                f'or "*", got {w!r}'
            )
    if all(w == "*" for w in out):
        raise ConfigError(
            f'concurrently(round_robin_weights={out!r}): not every weight may be "*" (each '
            "pass would only poll); give at least one op a number"
        )
    return out


def _check_output_indexes(indexes: Sequence[int], num_ops: int) -> frozenset[int]:
    out = list(indexes)
    if not out:
        raise ConfigError("concurrently(output_indexes=[]): keep at least one op's output")
    for i in out:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < num_ops:
            raise ConfigError(
                f"concurrently(output_indexes={out!r}): index {i!r} is out of range "
                f"[0, {num_ops}) for {num_ops} ops"
            )
    return frozenset(out)


def concurrently(
    ops: Sequence[LocalIterator[Any]],
    *,
    mode: ConcurrencyMode = "round_robin",
    output_indexes: Sequence[int] | None = None,
    round_robin_weights: Sequence[float | str] | None = None,
) -> LocalIterator[Any]:
    """Run sub-flows side by side as one stream; lazy (a combinator built on ``flow.union``).

    Items: the items of the ops whose index is in ``output_indexes`` (default: all), untouched.
    The other ops still run every time the merged stream is read; their items are dropped after
    their side effects happened.

    Order and blocking:

    - ``"round_robin"``: passes over the ops in order; in each pass op i gives up to
      ``round_robin_weights[i]`` items (default 1; a fraction is rounded at random with a fixed
      seed; ``"*"`` = as many as are ready without waiting, at most 100). Numbered ops block for
      their items, so the order is exact, except that an op answering ``NOT_READY`` (e.g.
      :func:`~rlflow.ops.replay` below ``learning_starts``, or :func:`dequeue` on an empty
      queue) ends its turn early.
    - ``"async"``: every op is polled; items come in whatever order they are ready, and when
      none is ready the reader waits on all of them at once.

    Ends when every op has ended. All ops share one context (counters, info).

    Errors (:class:`ConfigError`, when called): fewer than 2 ops, an unknown ``mode``, weights
    with ``mode="async"``, all weights ``"*"``, a weight <= 0, an output index out of range.

    >>> from rlflow import flow
    >>> a, b = flow.from_iterable([1, 2, 3]), flow.from_iterable([10, 20, 30, 40, 50, 60])
    >>> concurrently([a, b], round_robin_weights=[1, 2]).take(9)
    [1, 10, 20, 2, 30, 40, 3, 50, 60]
    >>> a, b = flow.from_iterable([1, 2, 3]), flow.from_iterable([10, 20])
    >>> concurrently([a, b], output_indexes=[1]).take(5)
    [10, 20]
    """
    children = list(ops)
    if len(children) < 2:
        raise ConfigError(f"concurrently() needs at least 2 ops, got {len(children)}")
    for i, op in enumerate(children):
        if not isinstance(op, LocalIterator):
            raise ConfigError(
                f"concurrently(): op {i} must be a LocalIterator, got {type(op).__name__}"
            )
    if mode not in _MODES:
        raise ConfigError(f"concurrently(mode={mode!r}): mode must be one of {_MODES}")
    weights: list[float | str] | None = None
    if round_robin_weights is not None:
        if mode != "round_robin":
            raise ConfigError(
                f"concurrently(mode={mode!r}, round_robin_weights=...): weights are only "
                "allowed with mode='round_robin'"
            )
        weights = _check_weights(round_robin_weights, len(children))
    keep = None if output_indexes is None else _check_output_indexes(output_indexes, len(children))
    tagged = [op.for_each(_Tag(i)) for i, op in enumerate(children)]
    merged = flow.union(tagged, deterministic=mode == "round_robin", round_robin_weights=weights)
    if keep is not None and len(keep) < len(children):
        merged = merged.filter(_KeepIndexes(keep))
    return merged.for_each(_untag)


# ------------------------------------------------------------------------------ queues
def _check_queue(q: Any, where: str) -> queue.Queue[Any]:
    if not isinstance(q, queue.Queue):
        raise ConfigError(f"{where} takes a queue.Queue, got {type(q).__name__}: {q!r}")
    return q


class Enqueue:
    """Put each item into a bounded queue without blocking; backpressure when it is full.

    Items: any ``T -> T`` (the item, once it is in the queue). Use with ``.for_each``. When the
    queue is full the call answers ``NOT_READY``: the stream gives ``NOT_READY`` (a concurrent
    union moves on to its other ops) and the same item is offered again on a later read, so
    nothing is dropped and upstream is not read meanwhile. Side effect: the queue.

    >>> import queue
    >>> from rlflow import flow
    >>> q = queue.Queue(maxsize=2)
    >>> flow.from_iterable([1, 2]).for_each(Enqueue(q)).take(2), q.qsize()
    ([1, 2], 2)
    """

    def __init__(self, q: queue.Queue[Any]) -> None:
        """Check that ``q`` is a ``queue.Queue``."""
        self.queue = _check_queue(q, "Enqueue")

    def __call__(self, item: Any) -> Any:
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            return NOT_READY
        return item


def _always_true() -> bool:
    return True


class _Forever:
    """An endless iterable of None: the ticks that drive a polling source."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class _DequeueOne:
    """``for_each`` function of :func:`dequeue`: one queue item, or NOT_READY when empty."""

    def __init__(self, q: queue.Queue[Any], check: Callable[[], bool]) -> None:
        self.queue = q
        self.check = check

    def __call__(self, _tick: None) -> Any:
        try:
            return self.queue.get_nowait()
        except queue.Empty:
            pass
        if not self.check():
            raise WorkerError(
                "dequeue: the queue is empty and check() returned False (the producer "
                "stopped); nothing more will arrive"
            )
        return NOT_READY


def dequeue(q: queue.Queue[Any], *, check: Callable[[], bool] = _always_true) -> LocalIterator[Any]:
    """Source: the items taken from a queue filled outside the plan (a learner thread); lazy.

    Items: whatever the producer puts, in queue order. When the queue is empty the stream gives
    ``NOT_READY`` (a concurrent union moves on; read alone, the reader sleeps with a short
    growing back-off: it never spins). Each time the queue is found empty, ``check()`` is
    called: it may raise (:meth:`LearnerThread.check` re-raises the thread's own exception) or
    return False, which raises :class:`WorkerError`. Never ends by itself. No side effects
    beyond taking items from the queue.

    >>> import queue
    >>> q = queue.Queue()
    >>> for i in range(3):
    ...     q.put(i)
    >>> dequeue(q).take(3)
    [0, 1, 2]
    """
    _check_queue(q, "dequeue")
    if not callable(check):
        raise ConfigError(f"dequeue(check={check!r}) must be a zero-argument callable")
    ticks = flow.from_iterable(_Forever(), name="dequeue")
    return ticks.for_each(_DequeueOne(q, check))


# ------------------------------------------------------------------------------ learner thread
_QUEUE_POLL_S = 0.1
"""How long the learner thread blocks on a queue before it looks at its stop flag."""


def _check_size(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what}={value!r} must be an int >= 1")
    return value


_LIVE_LEARNERS: weakref.WeakSet[LearnerThread] = weakref.WeakSet()


@atexit.register
def _stop_live_learners() -> None:
    for learner in list(_LIVE_LEARNERS):
        learner.stop(timeout_s=2.0)


def stop_learner_threads(local_worker: Any, timeout_s: float = 5.0) -> int:
    """Stop every running `LearnerThread` that trains ``local_worker``; return how many.

    `rlflow.Trainer.stop` calls it, so a stopped IMPALA/APPO/Ape-X run leaves no thread behind.
    """
    mine = [t for t in list(_LIVE_LEARNERS) if t.local_worker is local_worker and t.is_alive()]
    for learner in mine:
        learner.stop(timeout_s=timeout_s)
    return len(mine)


class LearnerThread(threading.Thread):
    """Trains the local worker on batches from a bounded queue, in a daemon thread.

    Args:
        local_worker: the learner (``workers.local_worker()``); the thread calls its
            ``learn_on_batch``.
        inqueue_size: capacity of :attr:`inqueue` (batches waiting to be learned), >= 1.
        outqueue_size: capacity of :attr:`outqueue` (results waiting to be read), >= 1; the
            thread waits when it is full.
        num_sgd_iter: passes over each batch, >= 1 (passed to ``learn_on_batch``).
        sgd_minibatch_size: rows per SGD step, >= 0 (0: the whole batch per step).
        policies: ids of the policies to train (None: all of the local worker's).

    Input (``inqueue``): a ``SampleBatch`` / ``MultiAgentBatch``, or an ``ActorItem(actor,
    batch)`` (from ``zip_with_source_actor``: e.g. the replay shard the batch came from).
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
        local_worker: RolloutWorker,
        *,
        inqueue_size: int = 16,
        outqueue_size: int = 64,
        num_sgd_iter: int = 1,
        sgd_minibatch_size: int = 0,
        policies: Sequence[str] | None = None,
    ) -> None:
        """Create the queues; the thread starts with :meth:`start`."""
        super().__init__(name="rlflow-learner", daemon=True)
        self.local_worker = local_worker
        self.policies = None if policies is None else list(policies)
        for pid in self.policies or ():
            local_worker.get_policy(pid)  # ConfigError naming the known ids if unknown
        self.num_sgd_iter = _check_size(num_sgd_iter, "LearnerThread(num_sgd_iter)")
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
            maxsize=_check_size(inqueue_size, "LearnerThread(inqueue_size)")
        )
        self.outqueue: queue.Queue[Any] = queue.Queue(
            maxsize=_check_size(outqueue_size, "LearnerThread(outqueue_size)")
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

    def step(self) -> bool:
        """Learn on one batch from :attr:`inqueue` if one arrives soon; return whether one did.

        Blocks at most about 0.1 s for a batch, and while :attr:`outqueue` is full.
        """
        start = time.perf_counter()
        try:
            item = self.inqueue.get(timeout=_QUEUE_POLL_S)
        except queue.Empty:
            return False
        self._inqueue_sizes.append(self.inqueue.qsize())
        self.queue_wait_timer.push(time.perf_counter() - start)
        actor, batch = (item.actor, item.item) if isinstance(item, ActorItem) else (None, item)
        if not isinstance(batch, SampleBatch | MultiAgentBatch):
            raise PlanError(f"LearnerThread takes SampleBatch or MultiAgentBatch, got {batch!r}")
        with self.learn_timer.timing(units=batch.count), self.lock:
            stats = self._learn(batch)
            self.weights_updated = True
        self.num_batches += 1
        result = TrainResult(batch.count, stats)
        out = result if actor is None else ActorItem(actor, result)
        while not self._stopping.is_set():
            try:
                self.outqueue.put(out, timeout=_QUEUE_POLL_S)
                break
            except queue.Full:
                continue
        return True

    def _learn(self, batch: SampleBatch | MultiAgentBatch) -> Any:
        options: dict[str, Any] = {}
        if self.num_sgd_iter != 1 or self.sgd_minibatch_size != 0:
            options.update(
                num_sgd_iter=self.num_sgd_iter, sgd_minibatch_size=self.sgd_minibatch_size
            )
        if self.policies is not None:
            options["policies"] = self.policies
        return self.local_worker.learn_on_batch(batch, **options)

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
        _LIVE_LEARNERS.add(self)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the thread to stop and wait up to ``timeout_s`` for it."""
        self._stopping.set()
        if self.is_alive():
            self.join(timeout_s)

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
        ctx.info[keys.LEARNER_INFO] = result.stats
        if self.learner is not None:
            ctx.info[keys.LEARNER_THREAD_INFO] = self.learner.stats()
        return item


class UpdateWorkerWeights:
    """Send the learner's weights to a worker once it delivered ``max_weight_sync_delay`` steps.

    Items: ``ActorItem(worker, batch) -> the same item`` (use after ``parallel_rollouts(mode=
    "async")...zip_with_source_actor()``, with ``.for_each``). Each worker has its own step
    counter; when it reaches ``max_weight_sync_delay`` the counter restarts and the weights go
    to that worker only (fire-and-forget ``set_weights`` with ``{"timestep": env steps
    sampled}``). The weights are ``put`` again only when they changed since the last ``put``:
    with a ``learner`` thread, when its ``weights_updated`` flag is set (read under its lock and
    cleared); without, on every send. Side effects: counter ``num_weight_syncs`` (one per
    send); timer ``update``.
    """

    def __init__(
        self,
        workers: WorkerSet,
        max_weight_sync_delay: int,
        *,
        learner: LearnerThread | None = None,
    ) -> None:
        """Validate ``max_weight_sync_delay`` (an int >= 1)."""
        self.workers = workers
        self.max_weight_sync_delay = _check_size(
            max_weight_sync_delay, "UpdateWorkerWeights(max_weight_sync_delay)"
        )
        if learner is not None and not isinstance(learner, LearnerThread):
            raise ConfigError(f"UpdateWorkerWeights(learner={learner!r}) must be a LearnerThread")
        self.learner = learner
        self._steps: collections.defaultdict[Any, int] = collections.defaultdict(int)
        self._weights_ref: Any = None

    def _weights(self) -> Any:
        local = self.workers.local_worker()
        if self.learner is None:
            return flow.put(local.get_weights())
        if self._weights_ref is None or self.learner.weights_updated:
            with self.learner.lock:
                weights = local.get_weights()
                self.learner.weights_updated = False
            self._weights_ref = flow.put(weights)
        return self._weights_ref

    def __call__(self, item: ActorItem) -> ActorItem:
        if not isinstance(item, ActorItem):
            raise PlanError(
                f"UpdateWorkerWeights takes ActorItem(worker, batch) items (use "
                f"zip_with_source_actor() first), got {item!r}"
            )
        actor, batch = item
        self._steps[actor] += batch.count
        if self._steps[actor] >= self.max_weight_sync_delay:
            self._steps[actor] = 0
            ctx = flow.current_metrics()
            with ctx.timers[keys.UPDATE_TIMER].timing():
                global_vars = {"timestep": ctx.counters[keys.NUM_ENV_STEPS_SAMPLED]}
                actor.set_weights.remote(self._weights(), global_vars)
            ctx.counters[keys.NUM_WEIGHT_SYNCS] += 1
        return item

"""The IMPALA plan: workers sample asynchronously while a learner thread trains on V-trace.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 7 (IMPALA); Espeholt et al. (ICML 2018)::

    enqueue_op: (1) parallel_rollouts(async) -> (2) MixInReplay(replay_proportion)
                -> ConcatBatches(train_batch_size)
                -> (3) Enqueue(learner.inqueue)       [LearnerThread: num_sgd_iter passes]
                -> (4) BroadcastUpdateLearnerWeights  [to the worker that sampled last]
    dequeue_op: (5) dequeue(learner.outqueue) -> (6) RecordStepsTrained
    (7) concurrently(enqueue_op, dequeue_op; async, output of dequeue_op)
        -> (8) standard_metrics_reporting

APPO (:mod:`rlflow.algorithms.appo`) reuses :func:`impala_train_op` and adds a target-network
update after (6).
"""

from __future__ import annotations

import random
from typing import Any

from rlflow import flow
from rlflow.algorithms.impala.config import IMPALAConfig
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError, PlanError
from rlflow.flow import ActorItem, LocalIterator
from rlflow.ops import (
    ConcatBatches,
    Enqueue,
    LearnerThread,
    RecordStepsTrained,
    TrainResult,
    concurrently,
    dequeue,
    keys,
    parallel_rollouts,
    standard_metrics_reporting,
)
from rlflow.workers import WorkerSet

__all__ = ["BroadcastUpdateLearnerWeights", "MixInReplay", "impala_plan", "impala_train_op"]


def impala_plan(workers: WorkerSet, config: IMPALAConfig) -> LocalIterator[dict[str, Any]]:
    """Build the IMPALA plan over ``workers``; each item is one iteration's result dict.

    Starts the learner thread (a daemon) now.
    """
    # (1)-(7) Sampling and learning side by side.
    train_op = impala_train_op(workers, config)
    # (8) One result per iteration, with the learner thread's queue statistics in "info".
    return standard_metrics_reporting(train_op, workers, config)


def impala_train_op(workers: WorkerSet, config: IMPALAConfig) -> LocalIterator[TrainResult]:
    """IMPALA's dataflow up to the metrics: one ``TrainResult`` per batch the learner trained.

    Starts a :class:`~rlflow.ops.LearnerThread` on the local worker now.
    """
    learner = LearnerThread(
        workers.local_worker(),
        inqueue_size=config.learner_queue_size,
        num_sgd_iter=config.num_sgd_iter,
        sgd_minibatch_size=config.sgd_minibatch_size,
        policies=config.policies_to_train,
    )
    learner.start()
    in_flight = config.max_sample_requests_in_flight_per_worker
    enqueue_op = (
        # (1) Each worker's batches as they arrive; (2) with replayed ones mixed in (none when
        # replay_proportion is 0), whole batches up to train_batch_size.
        parallel_rollouts(workers, mode="async", num_async=in_flight)
        .combine(
            MixInReplay(config.replay_buffer_num_slots, config.replay_proportion, seed=config.seed)
        )
        .combine(ConcatBatches(config.train_batch_size))
        # (3) To the learner thread; a full queue pauses sampling (backpressure).
        .for_each(Enqueue(learner.inqueue))
        # (4) The learner's latest weights to the worker whose batch came last.
        .zip_with_source_actor()
        .for_each(BroadcastUpdateLearnerWeights(workers, learner, config.broadcast_interval))
    )
    # (5) What the learner trained (its crash is raised here); (6) counted in the plan.
    dequeue_op = dequeue(learner.outqueue, check=learner.check).for_each(
        RecordStepsTrained(learner=learner)
    )
    # (7) Both run as their inputs are ready; the stream follows the learner.
    return concurrently([enqueue_op, dequeue_op], mode="async", output_indexes=[1])


class BroadcastUpdateLearnerWeights:
    """Send the learner thread's latest weights to the worker that delivered the last batch.

    Items: ``ActorItem(worker, batch) -> the same item`` (use with ``.for_each`` after
    ``zip_with_source_actor()``). Every item pushes the cached weights to its worker
    (fire-and-forget ``set_weights`` with ``{"timestep": env steps sampled}``). The cache is
    refreshed (``get_weights`` under the learner's lock, then ``put``) on the first item and
    afterwards only when the learner updated since the last refresh and at least
    ``broadcast_interval`` items passed. Side effects: counter ``num_weight_syncs`` (one per
    ``put``); timer ``update``; clears ``learner.weights_updated``.
    """

    def __init__(
        self, workers: WorkerSet, learner: LearnerThread, broadcast_interval: int = 1
    ) -> None:
        """Validate ``learner`` and ``broadcast_interval`` (an int >= 1)."""
        if not isinstance(learner, LearnerThread):
            raise ConfigError(
                f"BroadcastUpdateLearnerWeights(learner={learner!r}) must be a LearnerThread"
            )
        if (
            isinstance(broadcast_interval, bool)
            or not isinstance(broadcast_interval, int)
            or broadcast_interval < 1
        ):
            raise ConfigError(
                f"BroadcastUpdateLearnerWeights(broadcast_interval={broadcast_interval!r}) "
                "must be an int >= 1"
            )
        self.workers = workers
        self.learner = learner
        self.broadcast_interval = broadcast_interval
        self._since_put = 0
        self._weights_ref: Any = None

    def __call__(self, item: ActorItem) -> ActorItem:
        if not isinstance(item, ActorItem):
            raise PlanError(
                "BroadcastUpdateLearnerWeights takes ActorItem(worker, batch) items (use "
                f"zip_with_source_actor() first), got {item!r}"
            )
        ctx = flow.current_metrics()
        self._since_put += 1
        with ctx.timers[keys.UPDATE_TIMER].timing():
            due = self._since_put >= self.broadcast_interval and self.learner.weights_updated
            if self._weights_ref is None or due:
                with self.learner.lock:
                    weights = self.workers.local_worker().get_weights()
                    self.learner.weights_updated = False
                self._weights_ref = flow.put(weights)
                self._since_put = 0
                ctx.counters[keys.NUM_WEIGHT_SYNCS] += 1
            global_vars = {"timestep": ctx.counters[keys.NUM_ENV_STEPS_SAMPLED]}
            item.actor.set_weights.remote(self._weights_ref, global_vars)
        return item


class MixInReplay:
    """Keep recent batches in a ring and mix replayed ones into the stream (IMPALA's replay).

    Items: ``SampleBatch -> list[SampleBatch]``: the input, then ``k`` batches drawn uniformly
    from the ring (the input included), where ``k`` is random with mean ``replay_proportion``
    (``p`` = the proportion; while ``random() < p``: one more, ``p -= 1``). Use with
    ``.combine``. Side effects: the ring of the last ``num_slots`` inputs (oldest replaced
    first). ``replay_proportion=0`` passes every batch through alone and stores nothing.

    >>> from rlflow import flow
    >>> batches = [SampleBatch({"x": [i]}) for i in range(3)]
    >>> out = flow.from_iterable(batches).combine(MixInReplay(2, 0.0)).take(3)
    >>> [b["x"].tolist() for b in out]
    [[0], [1], [2]]
    """

    def __init__(
        self, num_slots: int, replay_proportion: float, *, seed: int | None = None
    ) -> None:
        """Validate: ``num_slots`` an int >= 0 (> 0 when replaying), proportion >= 0."""
        if isinstance(num_slots, bool) or not isinstance(num_slots, int) or num_slots < 0:
            raise ConfigError(f"MixInReplay(num_slots={num_slots!r}) must be an int >= 0")
        if (
            isinstance(replay_proportion, bool)
            or not isinstance(replay_proportion, int | float)
            or not replay_proportion >= 0
        ):
            raise ConfigError(
                f"MixInReplay(replay_proportion={replay_proportion!r}) must be a number >= 0"
            )
        if replay_proportion > 0 and num_slots == 0:
            raise ConfigError(
                f"MixInReplay(num_slots=0, replay_proportion={replay_proportion!r}): replaying "
                "needs a ring of at least 1 slot; set num_slots >= 1"
            )
        self.num_slots = num_slots
        self.replay_proportion = float(replay_proportion)
        self._ring: list[SampleBatch | MultiAgentBatch] = []
        self._next_slot = 0
        self._rng = random.Random(seed)

    def __call__(self, batch: SampleBatch | MultiAgentBatch) -> list[SampleBatch | MultiAgentBatch]:
        if self.replay_proportion == 0:
            return [batch]
        if len(self._ring) < self.num_slots:
            self._ring.append(batch)
        else:
            self._ring[self._next_slot] = batch
            self._next_slot = (self._next_slot + 1) % self.num_slots
        out = [batch]
        p = self.replay_proportion
        while self._rng.random() < p:
            p -= 1.0
            out.append(self._rng.choice(self._ring))
        return out

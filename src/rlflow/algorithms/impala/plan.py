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

Steps (1)-(7) are :func:`impala_train_op`; APPO (`rlflow.algorithms.appo`) runs it too, with a
target-network update after (6), as RLlib's APPO ran IMPALA's plan.
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.actor_learner.ops import BroadcastUpdateLearnerWeights, MixInReplay
from rlflow.algorithms.impala.config import IMPALAConfig
from rlflow.flow import LocalIterator
from rlflow.ops import (
    ConcatBatches,
    Enqueue,
    LearnerThread,
    RecordStepsTrained,
    TrainResult,
    concurrently,
    dequeue,
    parallel_rollouts,
    standard_metrics_reporting,
)
from rlflow.replay import register_replay_buffer
from rlflow.workers import WorkerSet

__all__ = ["impala_plan", "impala_train_op"]


def impala_plan(workers: WorkerSet, config: IMPALAConfig) -> LocalIterator[dict[str, Any]]:
    """Build the IMPALA plan over ``workers``; each item is one iteration's result dict.

    Starts the learner thread (a daemon) now.
    """
    # (1)-(7) Sampling and learning side by side.
    train_op = impala_train_op(workers, config)
    # (8) One result per iteration, with the learner thread's queue statistics in "info".
    return standard_metrics_reporting(train_op, workers, config)


def impala_train_op(workers: WorkerSet, config: IMPALAConfig) -> LocalIterator[TrainResult]:
    """Steps (1)-(7) of the module docstring: one ``TrainResult`` per batch the learner trained.

    Starts a :class:`~rlflow.ops.LearnerThread` on the learner now (``learner_queue_size``
    batches wait for it; ``num_sgd_iter`` passes over each, in minibatches of whole sequences,
    about ``sgd_minibatch_size`` env steps each) and registers the mix-in replay ring as
    ``"mix_in_replay"`` for checkpoints. Never ends by itself.
    """
    learner = LearnerThread(
        workers.learner(),  # the local worker, or the learner actors (num_learners)
        inqueue_size=config.learner_queue_size,
        num_sgd_iter=config.num_sgd_iter,
        sgd_minibatch_size=config.sgd_minibatch_size,
        policies=config.policies_to_train,
    )
    learner.start()
    in_flight = config.max_sample_requests_in_flight_per_worker
    mix_in = MixInReplay(config.replay_buffer_num_slots, config.replay_proportion, seed=config.seed)
    register_replay_buffer(workers, "mix_in_replay", mix_in)  # checkpoint_replay_buffers
    enqueue_op = (
        # (1) Each worker's batches as they arrive; (2) with replayed ones mixed in (none when
        # replay_proportion is 0), whole batches up to train_batch_size.
        # A learner that fetches its batches (learner actors) gets references: the batches stay
        # on the workers, the driver is off the data path.
        parallel_rollouts(
            workers, mode="async", num_async=in_flight, by_reference=learner.takes_references
        )
        .combine(mix_in)
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

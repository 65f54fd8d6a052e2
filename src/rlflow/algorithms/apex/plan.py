"""The Ape-X plan: sampling, replay and learning run concurrently, decoupled by queues.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 8 (Ape-X)::

    store_op:  (1) parallel_rollouts(async) -> (2) StoreToReplayBuffer(random shard)
               -> (3) UpdateWorkerWeights(max_weight_sync_delay)   [that worker only]
    replay_op: (4) replay(shards) -> (5) Enqueue(learner.inqueue)  [LearnerThread trains]
    update_op: (6) dequeue(learner.outqueue) -> (7) RecordStepsTrained
               -> (8) UpdateReplayPriorities [to the source shard] -> (9) UpdateTargetNetwork
    (10) concurrently(store_op, replay_op, update_op; async, output of update_op)
         -> (11) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.apex.config import ApexConfig
from rlflow.flow import LocalIterator
from rlflow.ops import (
    Enqueue,
    LearnerThread,
    RecordStepsTrained,
    StoreToReplayBuffer,
    UpdateReplayPriorities,
    UpdateTargetNetwork,
    UpdateWorkerWeights,
    concurrently,
    dequeue,
    parallel_rollouts,
    replay,
    standard_metrics_reporting,
)
from rlflow.replay import create_replay_actors
from rlflow.workers import WorkerSet

__all__ = ["apex_plan"]


def apex_plan(workers: WorkerSet, config: ApexConfig) -> LocalIterator[dict[str, Any]]:
    """Build the Ape-X plan over ``workers``; each item is one iteration's result dict.

    Starts the replay shards and the learner thread (a daemon) now.
    """
    shards = create_replay_actors(
        config.num_replay_buffer_shards,
        config.buffer_size,
        prioritized=config.prioritized_replay,
        alpha=config.prioritized_replay_alpha,
        beta=config.prioritized_replay_beta,
        learning_starts=config.learning_starts,
        replay_batch_size=config.train_batch_size,
        seed=config.seed,
    )
    learner = LearnerThread(
        workers.local_worker(),
        inqueue_size=config.learner_queue_size,
        policies=config.policies_to_train,
    )
    learner.start()
    store_op = (
        # (1) Batches from each worker as they come (initial priorities computed there).
        parallel_rollouts(workers, mode="async", num_async=config.num_async_rollout_requests)
        # (2) Into a random shard.
        .for_each(StoreToReplayBuffer(actors=shards, seed=config.seed))
        # (3) New weights to the worker that sampled, every max_weight_sync_delay of its steps.
        .zip_with_source_actor()
        .for_each(UpdateWorkerWeights(workers, config.max_weight_sync_delay, learner=learner))
    )
    # (4) Prioritized batches from the shards; (5) to the learner thread (backpressure).
    replay_op = (
        replay(actors=shards, num_async=config.num_async_replay_requests)
        .zip_with_source_actor()
        .for_each(Enqueue(learner.inqueue))
    )
    update_op = (
        # (6) What the learner trained; its crash is raised here.
        dequeue(learner.outqueue, check=learner.check)
        # (7) Count trained steps; (8) |TD error| priorities back to the batch's shard.
        .for_each(RecordStepsTrained(learner=learner))
        .for_each(UpdateReplayPriorities(epsilon=config.prioritized_replay_eps))
        # (9) Target network every target_network_update_freq trained steps.
        .for_each(
            UpdateTargetNetwork(workers, config.target_network_update_freq, by_steps_trained=True)
        )
    )
    # (10) All three run as their inputs are ready; results follow the learner.
    train_op = concurrently([store_op, replay_op, update_op], mode="async", output_indexes=[2])
    # (11) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

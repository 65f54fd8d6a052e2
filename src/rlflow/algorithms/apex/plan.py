"""The Ape-X plan: sampling, replay and learning run concurrently, decoupled by queues.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 8 (Ape-X)::

    store_op:  (1) parallel_rollouts(async) -> (2) StoreToReplayBuffer(random shard)
               -> (3) UpdateWorkerWeights(max_weight_sync_delay)   [that worker only]
               -> (3b) hold_sampling                    [training_intensity, if set]
    replay_op: (4) replay(shards) -> hold_replay -> (5) Enqueue(learner.inqueue)
                                                    [LearnerThread trains]
    update_op: (6) dequeue(learner.outqueue) -> (7) RecordStepsTrained
               -> (8) UpdateReplayPriorities [to the source shard] -> (9) UpdateTargetNetwork
    (10) concurrently(store_op, replay_op, update_op; async, output of update_op)
         -> (11) standard_metrics_reporting
"""

from __future__ import annotations

import collections
from typing import Any

from rlflow import flow
from rlflow.algorithms.apex.config import ApexDataflowConfig
from rlflow.algorithms.apex.intensity import KeepTrainingIntensity
from rlflow.algorithms.q_learning.replay import replay_shard_spec
from rlflow.checks import check_int
from rlflow.errors import ConfigError, PlanError
from rlflow.flow import ActorItem, LocalIterator
from rlflow.ops import (
    Enqueue,
    LearnerThread,
    LearnerWeights,
    RecordStepsTrained,
    StoreToReplayBuffer,
    UpdateReplayPriorities,
    UpdateTargetNetwork,
    concurrently,
    dequeue,
    keys,
    parallel_rollouts,
    replay,
    standard_metrics_reporting,
)
from rlflow.replay import ReplayShards, register_replay_buffer
from rlflow.replay.shards import create_replay_shards
from rlflow.workers import WorkerSet

__all__ = ["UpdateWorkerWeights", "apex_plan"]


def apex_plan(workers: WorkerSet, config: ApexDataflowConfig) -> LocalIterator[dict[str, Any]]:
    """Build the Ape-X plan over ``workers``; each item is one iteration's result dict.

    Starts the replay shards and the learner thread (a daemon) now. A replay shard that dies
    is started again empty and the plan goes on (counter ``num_replay_shard_restarts``).
    """
    shards = create_replay_shards(replay_shard_spec(config, config.num_replay_buffer_shards))
    register_replay_buffer(workers, "replay_shards", ReplayShards(shards.actors))
    learner = LearnerThread(
        workers.learner(),  # the local worker, or the learner actors (num_learners)
        inqueue_size=config.learner_queue_size,
        policies=config.policies_to_train,
    )
    learner.start()
    intensity = _intensity(config)
    store_op = (
        # (1) Batches from each worker as they come (initial priorities computed there).
        parallel_rollouts(
            workers,
            mode="async",
            num_async=config.num_async_rollout_requests,
            by_reference=learner.takes_references,  # learner actors: shards fetch from workers
        )
        # (2) Into a random shard.
        .for_each(StoreToReplayBuffer(actors=shards, seed=config.seed))
        # (3) New weights to the worker that sampled, every max_weight_sync_delay of its steps.
        .zip_with_source_actor()
        .for_each(UpdateWorkerWeights(workers, config.max_weight_sync_delay, learner=learner))
        # (3b) Held while the learner is behind training_intensity (if set).
        .for_each(intensity.hold_sampling)
    )
    # (4) Prioritized batches from the shards, held while ahead of training_intensity;
    # (5) to the learner thread (backpressure).
    replay_op = (
        replay(
            actors=shards,
            num_async=config.num_async_replay_requests,
            by_reference=learner.takes_references,
        )
        .zip_with_source_actor()
        .for_each(intensity.hold_replay)
        .for_each(Enqueue(learner.inqueue))
    )
    update_op = (
        # (6) What the learner trained; its crash is raised here.
        dequeue(learner.outqueue, check=learner.check)
        # (7) Count trained steps; (8) |TD error| priorities back to the batch's shard.
        .for_each(RecordStepsTrained(learner=learner))
        .for_each(UpdateReplayPriorities(actors=shards, epsilon=config.prioritized_replay_eps))
        # (9) Target network every target_network_update_freq trained steps.
        .for_each(
            UpdateTargetNetwork(workers, config.target_network_update_freq, by_steps_trained=True)
        )
    )
    # (10) All three run as their inputs are ready; results follow the learner.
    train_op = concurrently([store_op, replay_op, update_op], mode="async", output_indexes=[2])
    # (11) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)


def _intensity(config: ApexDataflowConfig) -> KeepTrainingIntensity:
    if config.training_intensity is None:
        return KeepTrainingIntensity(None, slack=0)  # both run free
    sampling_round = config.rollout_fragment_length * config.envs_per_worker()
    default = 2 * max(config.train_batch_size, config.training_intensity * sampling_round)
    slack = config.intensity_slack or int(default)
    return KeepTrainingIntensity(config.training_intensity, slack=slack)


class UpdateWorkerWeights:
    """Send the learner's weights to a worker once it delivered ``max_weight_sync_delay`` steps.

    Items: ``ActorItem(worker, batch) -> the same item`` (use after ``parallel_rollouts(mode=
    "async")...zip_with_source_actor()``, with ``.for_each``). Each worker has its own step
    counter; when it reaches ``max_weight_sync_delay`` the counter restarts and the weights go
    to that worker only (fire-and-forget ``set_weights`` with ``{"timestep": env steps
    sampled, "num_grad_updates_per_policy": the weights' versions}``). The weights are ``put``
    again only when they changed since the last ``put``: with a ``learner`` thread, when its
    ``weights_updated`` flag is set (read under its lock and cleared); without, on every send.
    Side effects: counter ``num_weight_syncs`` (one per send); timer ``update``.
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
        self.max_weight_sync_delay = check_int(
            max_weight_sync_delay, "UpdateWorkerWeights: max_weight_sync_delay", low=1
        )
        if learner is not None and not isinstance(learner, LearnerThread):
            raise ConfigError(f"UpdateWorkerWeights(learner={learner!r}) must be a LearnerThread")
        self.learner = learner
        self._steps: collections.defaultdict[Any, int] = collections.defaultdict(int)
        self._weights = LearnerWeights(workers, learner)

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
                if self._weights.changed:
                    self._weights.refresh()
                self._weights.send(actor)
            ctx.counters[keys.NUM_WEIGHT_SYNCS] += 1
        return item

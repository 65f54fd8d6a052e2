"""The DQN plan: store rollouts in a replay buffer and train on replayed batches, in turn.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 7 (DQN)::

    store_op:  (1) parallel_rollouts(bulk_sync) -> (2) StoreToReplayBuffer
    replay_op: (3) replay(learning_starts) -> (4) TrainOneStep -> (5) UpdateReplayPriorities
               -> (6) UpdateTargetNetwork(target_network_update_freq)
    (7) concurrently(store_op, replay_op; round robin, weights from training_intensity,
        output of replay_op only) -> (8) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.flow import LocalIterator
from rlflow.ops import (
    StoreToReplayBuffer,
    TrainOneStep,
    UpdateReplayPriorities,
    UpdateTargetNetwork,
    concurrently,
    parallel_rollouts,
    replay,
    standard_metrics_reporting,
)
from rlflow.replay import (
    beta_schedule,
    make_replay_buffer,
    register_replay_buffer,
    training_intensity_weights,
)
from rlflow.workers import WorkerSet

__all__ = ["dqn_plan"]


def dqn_plan(workers: WorkerSet, config: DQNConfig) -> LocalIterator[dict[str, Any]]:
    """Build the DQN plan over ``workers``; each item is one iteration's result dict."""
    buffer = make_replay_buffer(config, multi_agent=workers.local_worker().multi_agent)
    register_replay_buffer(workers, "replay_buffer", buffer)  # checkpoint_replay_buffers
    # (1) Every worker samples a fragment (n-step transitions); (2) into the buffer.
    store_op = parallel_rollouts(workers, mode="bulk_sync").for_each(
        StoreToReplayBuffer(local_buffer=buffer)
    )
    replay_op = (
        # (3) A train batch from the buffer, once it holds learning_starts transitions.
        replay(
            local_buffer=buffer,
            num_items=config.train_batch_size,
            learning_starts=config.learning_starts,
            beta=beta_schedule(config),
        )
        # (4) One learner step, weights pushed to the workers with the global timestep.
        .for_each(TrainOneStep(workers, policies=config.policies_to_train))
        # (5) |TD error| becomes the replayed rows' priority.
        .for_each(
            UpdateReplayPriorities(local_buffer=buffer, epsilon=config.prioritized_replay_eps)
        )
        # (6) Copy Q into the target network every target_network_update_freq steps.
        .for_each(UpdateTargetNetwork(workers, config.target_network_update_freq))
    )
    # (7) Alternate sampling and training; only the training results go on.
    train_op = concurrently(
        [store_op, replay_op],
        mode="round_robin",
        output_indexes=[1],
        round_robin_weights=training_intensity_weights(config),
    )
    # (8) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

"""PPO and DQN trained together on one worker set: the two-trainer composition.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), section 5 (composing multi-agent algorithms; RLlib's ``two_trainer_workflow``)::

    (1) parallel_rollouts(bulk_sync) -> (2) duplicate(2)
    DQN: (3) SelectExperiences([dqn]) -> StoreToReplayBuffer
         || (4) replay -> TrainOneStep([dqn]) -> UpdateReplayPriorities
                -> UpdateTargetNetwork([dqn])   (round robin, weights from training_intensity)
    PPO: (5) SelectExperiences([ppo]) -> ConcatBatches -> StandardizeFields
         -> TrainOneStep([ppo], minibatch SGD) -> UpdateKL
    (6) concurrently(ppo, dqn; async or round robin train_weights) -> (7) metrics

Each policy keeps its own loss, optimizer, batch size and schedule; only ``dqn_policy`` has a
replay buffer and a target network, only ``ppo_policy`` an adaptive KL coefficient.
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.ppo_dqn.config import DQN_POLICY, PPO_POLICY, PPODQNConfig
from rlflow.algorithms.q_learning.replay import make_replay_buffer, training_intensity_weights
from rlflow.data import ADVANTAGES
from rlflow.flow import LocalIterator
from rlflow.ops import (
    ConcatBatches,
    SelectExperiences,
    StandardizeFields,
    StoreToReplayBuffer,
    TrainOneStep,
    UpdateKL,
    UpdateReplayPriorities,
    UpdateTargetNetwork,
    concurrently,
    parallel_rollouts,
    replay,
    standard_metrics_reporting,
)
from rlflow.replay import register_replay_buffer
from rlflow.workers import WorkerSet

__all__ = ["ppo_dqn_plan"]


def ppo_dqn_plan(workers: WorkerSet, config: PPODQNConfig) -> LocalIterator[dict[str, Any]]:
    """Build the composed plan; each item is one iteration's result dict."""
    ppo, dqn = config.ppo, config.dqn
    buffer = make_replay_buffer(dqn, multi_agent=True)
    register_replay_buffer(workers, "dqn_replay_buffer", buffer)  # checkpoint_replay_buffers
    # (1) One sampling round of every worker; (2) both learners see all of it.
    rollouts = parallel_rollouts(workers, mode="bulk_sync")
    r1, r2 = rollouts.duplicate(n=2)
    # (3) DQN stores its agents' transitions ...
    dqn_store = r1.for_each(SelectExperiences([DQN_POLICY])).for_each(
        StoreToReplayBuffer(local_buffer=buffer)
    )
    # (4) ... and trains on replayed ones, with its own target network.
    dqn_replay = (
        replay(
            local_buffer=buffer,
            num_items=dqn.train_batch_size,
            learning_starts=dqn.learning_starts,
        )
        .for_each(TrainOneStep(workers, policies=[DQN_POLICY]))
        .for_each(UpdateReplayPriorities(local_buffer=buffer, epsilon=dqn.prioritized_replay_eps))
        .for_each(
            UpdateTargetNetwork(workers, dqn.target_network_update_freq, policies=[DQN_POLICY])
        )
    )
    dqn_op = concurrently(
        [dqn_store, dqn_replay],
        mode="round_robin",
        output_indexes=[1],
        round_robin_weights=training_intensity_weights(dqn),
    )
    # (5) PPO batches its agents' fragments and does minibatch SGD on them.
    ppo_op = (
        r2.for_each(SelectExperiences([PPO_POLICY]))
        .combine(ConcatBatches(ppo.train_batch_size))
        .for_each(StandardizeFields([ADVANTAGES]))
        .for_each(
            TrainOneStep(
                workers,
                policies=[PPO_POLICY],
                num_sgd_iter=ppo.num_sgd_iter,
                sgd_minibatch_size=ppo.sgd_minibatch_size,
            )
        )
        # Adapt the KL penalty to the KL of this step, as ppo_plan does.
        .for_each(UpdateKL(workers))
    )
    # (6) Both learners side by side: as each is ready, or train_weights[i] steps per turn.
    weights = config.train_weights
    train_op = concurrently(
        [ppo_op, dqn_op],
        mode="async" if weights is None else "round_robin",
        round_robin_weights=weights,
    )
    # (7) One result per iteration, with policy_reward_mean per policy.
    return standard_metrics_reporting(train_op, workers, config)

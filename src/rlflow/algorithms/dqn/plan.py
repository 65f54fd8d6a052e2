"""The DQN plan: store rollouts in a replay buffer and train on replayed batches, in turn.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 7 (DQN)::

    store_op:  (1) parallel_rollouts(bulk_sync) (or recorded transitions: input, input_mix)
               -> (2) StoreToReplayBuffer (of the trained policies: with policies_to_train,
               SelectExperiences first)
    replay_op: (3) replay(learning_starts) -> (4) TrainOneStep -> (5) UpdateReplayPriorities
               -> (6) UpdateTargetNetwork(target_network_update_freq)
    (7) concurrently(store_op, replay_op; round robin, weights from training_intensity,
        output of replay_op only) -> (8) standard_metrics_reporting

Steps (1)-(7) are :func:`store_and_replay`; SAC and TD3 (`rlflow.algorithms.sac`,
`rlflow.algorithms.td3`) run it too, as RLlib ran both on DQN's plan.
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.q_learning.config import ReplayAlgorithmConfig
from rlflow.algorithms.q_learning.replay import (
    beta_schedule,
    make_replay_buffer,
    training_intensity_weights,
)
from rlflow.data.sample_batch import ACTIONS, NEXT_OBS, OBS, REWARDS, TERMINATEDS
from rlflow.flow import LocalIterator
from rlflow.ops import (
    SelectExperiences,
    StoreToReplayBuffer,
    TrainOneStep,
    UpdateReplayPriorities,
    UpdateTargetNetwork,
    concurrently,
    experience,
    replay,
    standard_metrics_reporting,
)
from rlflow.ops.offline import recorded_rows_per_batch, require_columns
from rlflow.replay import DISCOUNTS, register_replay_buffer
from rlflow.workers import WorkerSet

__all__ = ["REPLAY_COLUMNS", "dqn_plan", "store_and_replay"]

REPLAY_COLUMNS = [OBS, ACTIONS, REWARDS, NEXT_OBS, TERMINATEDS, DISCOUNTS]
"""The n-step transitions a replay policy trains on (what recorded experience must hold to
fill the buffer: a run of DQN, SAC or TD3 records them)."""


def dqn_plan(workers: WorkerSet, config: ReplayAlgorithmConfig) -> LocalIterator[dict[str, Any]]:
    """Build the DQN plan over ``workers``; each item is one iteration's result dict."""
    # (1)-(7) Sample into the buffer and train the Q network on replayed batches, in turn.
    train_op = store_and_replay(workers, config)
    # (8) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)


def store_and_replay(
    workers: WorkerSet, config: ReplayAlgorithmConfig, *, recorded_only: bool = False
) -> LocalIterator[dict[str, Any]]:
    """Sample into a replay buffer and train on replayed batches, in turn (module docstring).

    Source: items are the learner stats of each train step (dict), lazily pulled; each pull
    runs one round-robin turn (a sampling round, or a train step). Side effects: builds the
    local buffer (per policy in a multi-agent run) and registers it as ``"replay_buffer"``
    for checkpoints; the learner's policies (``config.policies_to_train``) train and their
    targets update (each policy's ``update_target()``); weights go to every worker after each
    train step; counters as its operators write them. Reads ``config``'s replay fields,
    ``train_batch_size``, ``target_network_update_freq`` and ``policies_to_train``. Never
    ends by itself. With ``recorded_only`` (CQL) the source must be recorded experience
    (`rlflow.ops.offline.experience`).
    """
    buffer = make_replay_buffer(config, multi_agent=workers.local_worker().multi_agent)
    register_replay_buffer(workers, "replay_buffer", buffer)  # checkpoint_replay_buffers
    # (1) Every worker samples a fragment (n-step transitions), or recorded ones are read
    # (input, input_mix); (2) into the buffer.
    steps_per_round = None
    if config.reads_recorded():
        require_columns(config, REPLAY_COLUMNS, f"{type(config).__name__} replay")
        if not config.input_mix:  # recorded only: a turn stores one recorded batch
            steps_per_round = recorded_rows_per_batch(config)
    rollouts = experience(workers, config, recorded_only=recorded_only)
    if config.policies_to_train is not None:  # policies that only act fill no buffer
        rollouts = rollouts.for_each(SelectExperiences(config.policies_to_train))
    store_op = rollouts.for_each(StoreToReplayBuffer(local_buffer=buffer))
    # (3) A train batch, once the buffer holds learning_starts transitions.
    replayed = replay(
        local_buffer=buffer,
        num_items=config.train_batch_size,
        learning_starts=config.learning_starts,
        beta=beta_schedule(config),
    )
    # (4) One learner step; weights pushed to the workers with the global timestep.
    trained = replayed.for_each(TrainOneStep(workers, policies=config.policies_to_train))
    # (5) |TD error| becomes the replayed rows' priority (with prioritized replay).
    prioritized = trained.for_each(
        UpdateReplayPriorities(local_buffer=buffer, epsilon=config.prioritized_replay_eps)
    )
    # (6) The policies' target networks, every target_network_update_freq sampled steps.
    replay_op = prioritized.for_each(
        UpdateTargetNetwork(workers, config.target_network_update_freq)
    )
    # (7) Alternate sampling and training; only the training results go on.
    return concurrently(
        [store_op, replay_op],
        mode="round_robin",
        output_indexes=[1],
        round_robin_weights=training_intensity_weights(config, steps_per_round),
    )

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

import functools
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
    LinearSchedule,
    MultiAgentReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
)
from rlflow.workers import WorkerSet

__all__ = ["dqn_plan", "dqn_round_robin_weights", "make_replay_buffer"]


def dqn_plan(workers: WorkerSet, config: DQNConfig) -> LocalIterator[dict[str, Any]]:
    """Build the DQN plan over ``workers``; each item is one iteration's result dict."""
    buffer = make_replay_buffer(config, multi_agent=workers.local_worker().multi_agent)
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
            beta=_beta_schedule(config),
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
        round_robin_weights=dqn_round_robin_weights(config),
    )
    # (8) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)


def make_replay_buffer(
    config: DQNConfig, *, multi_agent: bool = False
) -> ReplayBuffer | MultiAgentReplayBuffer:
    """The plan's local buffer: prioritized or uniform, ``buffer_size`` transitions (per
    policy, in a `MultiAgentReplayBuffer`, with ``multi_agent``)."""
    if multi_agent:
        return MultiAgentReplayBuffer(functools.partial(_single_buffer, config))
    return _single_buffer(config)


def _single_buffer(config: DQNConfig) -> ReplayBuffer:
    if config.prioritized_replay:
        return PrioritizedReplayBuffer(
            config.buffer_size,
            alpha=config.prioritized_replay_alpha,
            beta=config.prioritized_replay_beta,
            seed=config.seed,
        )
    return ReplayBuffer(config.buffer_size, seed=config.seed)


def _beta_schedule(config: DQNConfig) -> LinearSchedule | None:
    if not config.prioritized_replay:
        return None
    return LinearSchedule(
        initial=config.prioritized_replay_beta,
        final=config.final_prioritized_replay_beta,
        steps=config.prioritized_replay_beta_annealing_timesteps,
    )


def dqn_round_robin_weights(config: DQNConfig) -> list[float | str]:
    """Round-robin weights ``[1, k]`` of (store_op, replay_op) for ``training_intensity``.

    One store item is one sampling round of ``S = rollout_fragment_length *
    num_envs_per_worker * max(num_workers, 1)`` env steps; one replay item trains on
    ``train_batch_size`` (B) transitions. For ``training_intensity`` I replayed transitions per
    sampled one, each round is followed by ``k = I * S / B`` train steps (a fraction is drawn
    at random, so the mean is exact). Without ``training_intensity``, ``k = 1``: the "native"
    intensity ``B / S``.

    >>> dqn_round_robin_weights(DQNConfig(rollout_fragment_length=4, train_batch_size=32,
    ...                                   training_intensity=16))
    [1, 2.0]
    """
    if config.training_intensity is None:
        return [1, 1]
    steps_per_round = (
        config.rollout_fragment_length * config.num_envs_per_worker * max(config.num_workers, 1)
    )
    return [1, config.training_intensity * steps_per_round / config.train_batch_size]

"""The PPO plan: synchronous sampling, standardized GAE advantages, minibatch SGD epochs.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 6 (PPO)::

    (1) parallel_rollouts(bulk_sync) -> (2) SelectExperiences(trainable policies)
        -> (3) ConcatBatches(train_batch_size) -> (4) StandardizeFields([advantages])
        -> (5) TrainOneStep(num_sgd_iter, sgd_minibatch_size) -> (6) UpdateKL
        -> (7) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.ppo.config import PPOConfig
from rlflow.data import ADVANTAGES
from rlflow.flow import LocalIterator
from rlflow.ops import (
    ConcatBatches,
    SelectExperiences,
    StandardizeFields,
    TrainOneStep,
    UpdateKL,
    parallel_rollouts,
    standard_metrics_reporting,
)
from rlflow.workers import WorkerSet

__all__ = ["ppo_plan"]


def ppo_plan(workers: WorkerSet, config: PPOConfig) -> LocalIterator[dict[str, Any]]:
    """Build the PPO plan over ``workers``; each item is one iteration's result dict."""
    policies = config.policies_to_train or list(workers.local_worker().policy_map)
    # (1) Every worker samples a fragment (advantages by GAE); one batch per round (with
    # sample_ahead, the next round is sampled while this one trains).
    rollouts = parallel_rollouts(workers, mode="bulk_sync", ahead=config.sample_ahead)
    train_op = (
        # (2) Keep the experience of the policies PPO trains.
        rollouts.for_each(SelectExperiences(policies))
        # (3) Gather train_batch_size steps.
        .combine(ConcatBatches(config.train_batch_size))
        # (4) Advantages with mean 0 and std 1 over the train batch.
        .for_each(StandardizeFields([ADVANTAGES]))
        # (5) Epochs of minibatch SGD, then push weights to the workers.
        .for_each(
            TrainOneStep(
                workers,
                num_sgd_iter=config.num_sgd_iter,
                sgd_minibatch_size=config.sgd_minibatch_size,
                policies=policies,
            )
        )
        # (6) Adapt the KL penalty to the KL of this step.
        .for_each(UpdateKL(workers))
    )
    # (7) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

"""The MAPPO plan: PPO's dataflow on a team's rows (one row per team step).

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 6 (PPO), run on the rows of agent groups (`rlflow.envs.groups`): each row
holds the members' observations, their joint action, the team reward and the global state, and
its GAE advantage comes from the centralized critic ``V(s)`` when the worker closes a fragment
(`MAPPOPolicy`; Yu et al. 2022)::

    (1) parallel_rollouts(bulk_sync) -> (2) SelectExperiences(the team's policy)
        -> (3) ConcatBatches(train_batch_size) -> (4) StandardizeFields([advantages])
        -> (5) TrainOneStep(num_sgd_iter, sgd_minibatch_size) -> (6) UpdateKL
        -> (7) standard_metrics_reporting

The value normalization's statistics move in step (5) (every minibatch's targets, before its
loss) and reach the workers with the weights.
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.mappo.config import MAPPOConfig
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

__all__ = ["mappo_plan"]


def mappo_plan(workers: WorkerSet, config: MAPPOConfig) -> LocalIterator[dict[str, Any]]:
    """Build the MAPPO plan over ``workers``; each item is one iteration's result dict."""
    policies = config.policies_to_train or list(workers.local_worker().policy_map)
    # (1) Every worker samples a fragment of team steps (GAE on the centralized critic).
    rollouts = parallel_rollouts(workers, mode="bulk_sync", ahead=config.sample_ahead)
    train_op = (
        # (2) Keep the experience of the team policies MAPPO trains.
        rollouts.for_each(SelectExperiences(policies))
        # (3) Gather train_batch_size team steps.
        .combine(ConcatBatches(config.train_batch_size))
        # (4) Team advantages with mean 0 and std 1 over the train batch.
        .for_each(StandardizeFields([ADVANTAGES]))
        # (5) Epochs of minibatch SGD (per-agent clipped ratios, normalized values), then
        # push weights (value statistics included) to the workers.
        .for_each(
            TrainOneStep(
                workers,
                num_sgd_iter=config.num_sgd_iter,
                sgd_minibatch_size=config.sgd_minibatch_size,
                policies=policies,
            )
        )
        # (6) Adapt the KL penalty, when one is set (kl_coeff > 0).
        .for_each(UpdateKL(workers))
    )
    # (7) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

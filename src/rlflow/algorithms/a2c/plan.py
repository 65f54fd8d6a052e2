"""The A2C plan: synchronous sampling; whole-batch steps, or averaged microbatch gradients.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), section 3::

    (1) parallel_rollouts(bulk_sync)
    (2a) -> ConcatBatches(train_batch_size) -> TrainOneStep
    (2b) -> ConcatBatches(microbatch_size) -> ComputeGradients -> batch(k)
         -> AverageGradients -> ApplyGradients          (k microbatches cover a train batch)
    (3) -> standard_metrics_reporting
"""

from __future__ import annotations

import math
from typing import Any

from rlflow.algorithms.a2c.config import A2CConfig
from rlflow.flow import LocalIterator
from rlflow.ops import (
    ApplyGradients,
    AverageGradients,
    ComputeGradients,
    ConcatBatches,
    TrainOneStep,
    parallel_rollouts,
    standard_metrics_reporting,
)
from rlflow.workers import WorkerSet

__all__ = ["a2c_plan"]


def a2c_plan(workers: WorkerSet, config: A2CConfig) -> LocalIterator[dict[str, Any]]:
    """Build the A2C plan over ``workers``; each item is one iteration's result dict."""
    # (1) Every worker samples a fragment; one batch per round.
    rollouts = parallel_rollouts(workers, mode="bulk_sync")
    # The one branch: microbatching trades one big backward pass for several small ones.
    if config.microbatch_size is None:
        # (2a) One step per train batch, then push weights.
        train_op = rollouts.combine(ConcatBatches(config.train_batch_size)).for_each(
            TrainOneStep(workers, policies=config.policies_to_train)
        )
    else:
        # (2b) Gradients per microbatch, averaged over a train batch, applied once.
        num_microbatches = math.ceil(config.train_batch_size / config.microbatch_size)
        train_op = (
            rollouts.combine(ConcatBatches(config.microbatch_size))
            .for_each(ComputeGradients(workers))
            .batch(num_microbatches)
            .for_each(AverageGradients())
            .for_each(ApplyGradients(workers, policies=config.policies_to_train))
        )
    # (3) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

"""The PG plan: synchronous sampling, one gradient step per train batch.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), the default execution plan (paper Fig. 5 shape)::

    (1) parallel_rollouts(bulk_sync) -> (2) ConcatBatches(train_batch_size)
        -> (3) TrainOneStep (learn, broadcast weights) -> (4) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.pg.config import PGConfig
from rlflow.flow import LocalIterator
from rlflow.ops import ConcatBatches, TrainOneStep, parallel_rollouts, standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["pg_plan"]


def pg_plan(workers: WorkerSet, config: PGConfig) -> LocalIterator[dict[str, Any]]:
    """Build the PG plan over ``workers``; each item is one iteration's result dict."""
    # (1) Every worker samples a fragment; one batch per round.
    rollouts = parallel_rollouts(workers, mode="bulk_sync")
    # (2) Gather train_batch_size steps; (3) one step on them, then push weights.
    train_op = rollouts.combine(ConcatBatches(config.train_batch_size)).for_each(
        TrainOneStep(workers, policies=config.policies_to_train)
    )
    # (4) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

"""The A3C plan: gradients computed on the workers, applied as they arrive.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 4 (asynchronous optimization)::

    (1) async_gradients(workers) -> (2) ApplyGradients(update_all=False)
        (new weights go back only to the worker whose gradient was applied)
    -> (3) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.a3c.config import A3CConfig
from rlflow.flow import LocalIterator
from rlflow.ops import ApplyGradients, async_gradients, standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["a3c_plan"]


def a3c_plan(workers: WorkerSet, config: A3CConfig) -> LocalIterator[dict[str, Any]]:
    """Build the A3C plan over ``workers``; each item is one iteration's result dict."""
    # (1) Workers sample and compute gradients; (2) apply each, update only its source.
    train_op = async_gradients(workers).for_each(
        ApplyGradients(workers, update_all=False, policies=config.policies_to_train)
    )
    # (3) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

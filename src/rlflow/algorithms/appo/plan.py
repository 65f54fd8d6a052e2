"""The APPO plan: IMPALA's dataflow, plus a target-network update after train steps.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), section 5 (APPO shares IMPALA's plan, as in RLlib)::

    (1) impala_train_op  [async rollouts -> ConcatBatches -> Enqueue(learner) -> broadcast
                          weights  ||  dequeue(learner) -> RecordStepsTrained]
    -> (2) UpdateTargetNetwork(target_network_update_freq, by env steps trained)
    -> (3) standard_metrics_reporting

(1) is written out in `rlflow.algorithms.impala.plan`.
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.appo.config import APPOConfig
from rlflow.algorithms.impala.plan import impala_train_op
from rlflow.flow import LocalIterator
from rlflow.ops import UpdateTargetNetwork, standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["appo_plan"]


def appo_plan(workers: WorkerSet, config: APPOConfig) -> LocalIterator[dict[str, Any]]:
    """Build the APPO plan over ``workers``; each item is one iteration's result dict.

    Starts the learner thread (a daemon) now. The target network is copied from the plan's
    thread while the learner thread trains: a copy may mix weights of two consecutive SGD
    steps, which is harmless for a network that lags by thousands of steps anyway.
    """
    train_op = (
        # (1) Sampling and learning side by side (APPOPolicy's clipped surrogate).
        impala_train_op(workers, config)
        # (2) pi_target <- pi every target_network_update_freq trained env steps.
        .for_each(
            UpdateTargetNetwork(workers, config.target_network_update_freq, by_steps_trained=True)
        )
    )
    # (3) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

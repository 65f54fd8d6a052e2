"""The IMPALA plan: workers sample asynchronously while a learner thread trains on V-trace.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 7 (IMPALA); Espeholt et al. (ICML 2018)::

    enqueue_op: (1) parallel_rollouts(async) -> (2) MixInReplay(replay_proportion)
                -> ConcatBatches(train_batch_size)
                -> (3) Enqueue(learner.inqueue)       [LearnerThread: num_sgd_iter passes]
                -> (4) BroadcastUpdateLearnerWeights  [to the worker that sampled last]
    dequeue_op: (5) dequeue(learner.outqueue) -> (6) RecordStepsTrained
    (7) concurrently(enqueue_op, dequeue_op; async, output of dequeue_op)
        -> (8) standard_metrics_reporting

Steps (1)-(7) are :func:`rlflow.ops.impala_train_op`, shared with APPO
(:mod:`rlflow.algorithms.appo`), which adds a target-network update after (6).
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.impala.config import IMPALAConfig
from rlflow.flow import LocalIterator
from rlflow.ops import impala_train_op, standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["impala_plan"]


def impala_plan(workers: WorkerSet, config: IMPALAConfig) -> LocalIterator[dict[str, Any]]:
    """Build the IMPALA plan over ``workers``; each item is one iteration's result dict.

    Starts the learner thread (a daemon) now.
    """
    # (1)-(7) Sampling and learning side by side.
    train_op = impala_train_op(workers, config)
    # (8) One result per iteration, with the learner thread's queue statistics in "info".
    return standard_metrics_reporting(train_op, workers, config)

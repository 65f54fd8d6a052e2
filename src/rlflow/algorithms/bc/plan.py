"""The BC plan: recorded experience in, behaviour cloning out::

    (1) experience(input) -> (2) ConcatBatches(train_batch_size)
        -> (3) TrainOneStep -> (4) standard_metrics_reporting (+ evaluation on a live env)

MARWIL's plan (`rlflow.algorithms.marwil.marwil_plan`) without the returns stage: with ``beta``
0 the loss reads only the observations and actions.
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.bc.config import BCConfig
from rlflow.flow import LocalIterator
from rlflow.ops import ConcatBatches, TrainOneStep, experience, standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["bc_plan"]


def bc_plan(workers: WorkerSet, config: BCConfig) -> LocalIterator[dict[str, Any]]:
    """Build the BC plan over ``workers``; each item is one iteration's result dict."""
    # (1) Recorded batches, read in parallel and shuffled; (2) train_batch_size rows.
    train_op = (
        experience(workers, config, recorded_only=True)
        .combine(ConcatBatches(config.train_batch_size))
        # (3) Epochs of minibatches of imitation on them.
        .for_each(
            TrainOneStep(
                workers,
                policies=config.policies_to_train,
                num_sgd_iter=config.num_sgd_iter,
                sgd_minibatch_size=config.sgd_minibatch_size,
            )
        )
    )
    # (4) One result per iteration, with an evaluation every evaluation_interval.
    return standard_metrics_reporting(train_op, workers, config)

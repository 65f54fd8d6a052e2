"""The DD-PPO plan: decentralized PPO, the rollout workers are the learners.

Wijmans et al., "DD-PPO: Learning Near-Perfect PointGoal Navigators from 2.5 Billion Frames"
(ICLR 2020), Fig. 1 and Sec. 4, on rlflow's dataflow (RLlib's ``DDPPO``)::

    (1) the remote workers join one process group, from the local worker's weights
    (2) decentralized_rounds, on every worker at once:
          sample -> preempted once preemption_threshold of the workers are done
          -> standardize its advantages -> (3) SGD epochs on its own batch,
          every step's gradients all-reduced among the workers
    (4) RecordRound: the driver counts steps and takes worker 1's weights
    (5) standard_metrics_reporting

No sample batch passes through the driver and there is no central learner: only steps,
timings, learner stats and (``keep_local_weights_in_sync``) one worker's weights come back.
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.ddppo.config import DDPPOConfig
from rlflow.algorithms.ddppo.decentralized import RecordRound, decentralized_rounds
from rlflow.flow import LocalIterator
from rlflow.ops import standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["ddppo_plan"]


def ddppo_plan(workers: WorkerSet, config: DDPPOConfig) -> LocalIterator[dict[str, Any]]:
    """Build the DD-PPO plan over ``workers``; each item is one iteration's result dict."""
    # (1)-(3) Join the workers in one group; then each round every worker samples (a straggler
    # is preempted), standardizes its advantages and learns with all-reduced gradients.
    rounds = decentralized_rounds(workers, config)
    # (4) Count the round's steps; the local worker takes worker 1's weights.
    train_op = rounds.for_each(RecordRound(workers))
    # (5) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

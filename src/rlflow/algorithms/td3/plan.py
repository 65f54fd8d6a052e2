"""The TD3 plan: sample into a replay buffer, train on replayed batches, delayed Polyak targets.

Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic Methods" (ICML 2018),
Algorithm 1, on the replay dataflow RLlib ran TD3 with (DQN's;
`rlflow.algorithms.dqn.plan.store_and_replay`)::

    (1) sample (actor + Gaussian noise) -> store | (2) replay -> critics' step (the actor's every
        policy_delay) -> priorities -> Polyak targets after actor steps, in turn
        (training_intensity)
    (3) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.dqn.plan import store_and_replay
from rlflow.algorithms.td3.config import TD3Config
from rlflow.flow import LocalIterator
from rlflow.ops import standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["td3_plan"]


def td3_plan(workers: WorkerSet, config: TD3Config) -> LocalIterator[dict[str, Any]]:
    """Build the TD3 plan over ``workers``; each item is one iteration's result dict."""
    # (1) + (2) Sampling and TD3Policy's updates, alternating.
    train_op = store_and_replay(workers, config)
    # (3) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

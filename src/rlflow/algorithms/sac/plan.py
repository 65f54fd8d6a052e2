"""The SAC plan: sample into a replay buffer, train on replayed batches, Polyak targets.

Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (2018), Algorithm 1, on the
replay dataflow RLlib ran SAC with (DQN's; `rlflow.algorithms.dqn.plan.store_and_replay`)::

    (1) sample (squashed Gaussian actor) -> store | (2) replay -> one Adam step of the critics,
        the actor and alpha -> priorities -> Polyak targets (tau), in turn (training_intensity)
    (3) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.dqn.plan import store_and_replay
from rlflow.algorithms.sac.config import SACConfig
from rlflow.flow import LocalIterator
from rlflow.ops import standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["sac_plan"]


def sac_plan(workers: WorkerSet, config: SACConfig) -> LocalIterator[dict[str, Any]]:
    """Build the SAC plan over ``workers``; each item is one iteration's result dict."""
    # (1) + (2) Sampling and SACPolicy's updates, alternating.
    train_op = store_and_replay(workers, config)
    # (3) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

"""The CQL plan: recorded transitions into replay, SAC's updates with a conservative critic.

Kumar et al., "Conservative Q-Learning for Offline Reinforcement Learning" (NeurIPS 2020) on
the replay dataflow SAC runs (DQN's; `rlflow.algorithms.dqn.plan.store_and_replay`), its source
the recorded experience of ``input`` (or ``input_mix``) instead of the rollout workers::

    (1) read recorded n-step transitions -> store | (2) replay -> one Adam step of the
        conservative critics, the actor (imitating for bc_iters steps) and alpha -> Polyak
        targets, in turn (training_intensity)
    (3) standard_metrics_reporting (+ evaluation on a live env, the only env use)
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.cql.config import CQLConfig
from rlflow.algorithms.dqn.plan import store_and_replay
from rlflow.flow import LocalIterator
from rlflow.ops import standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["cql_plan"]


def cql_plan(workers: WorkerSet, config: CQLConfig) -> LocalIterator[dict[str, Any]]:
    """Build the CQL plan over ``workers``; each item is one iteration's result dict."""
    # (1) + (2) Recorded transitions into the buffer and CQLPolicy's updates, alternating.
    train_op = store_and_replay(workers, config, recorded_only=True)
    # (3) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

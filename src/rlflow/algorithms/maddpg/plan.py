"""The MADDPG plan: a team's rows into a replay buffer, centralized critics and decentralized
actors trained on replayed batches, Polyak targets.

Lowe et al., "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive Environments" (NeurIPS
2017), Algorithm 1, on the replay dataflow (DQN's: `rlflow.algorithms.dqn.plan.store_and_replay`),
where one row is one env step of a group (every member's observation, the joint action, the
team reward: `rlflow.envs.groups`)::

    (1) sample (each member's actor on its own observation, + exploration) -> store
    | (2) replay -> every member's critic and actor in one step -> priorities -> Polyak
        targets, in turn (training_intensity; the paper's: a step per 100 env steps)
    (3) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.dqn.plan import store_and_replay
from rlflow.algorithms.maddpg.config import MADDPGConfig
from rlflow.flow import LocalIterator
from rlflow.ops import standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["maddpg_plan"]


def maddpg_plan(workers: WorkerSet, config: MADDPGConfig) -> LocalIterator[dict[str, Any]]:
    """Build the MADDPG plan over ``workers``; each item is one iteration's result dict."""
    # (1) + (2) Sampling the team's rows and MADDPGPolicy's updates, alternating.
    train_op = store_and_replay(workers, config)
    # (3) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

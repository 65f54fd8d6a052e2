"""The MAPPO plan: PPO's dataflow on a team's rows (one row per team step).

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 6 (PPO), run on the rows of agent groups (`rlflow.envs.groups`): each row
holds the members' observations, their joint action, the team reward and the global state, and
its GAE advantage comes from the centralized critic ``V(s)`` when the worker closes a fragment
(`MAPPOPolicy`; Yu et al. 2022)::

    (1) parallel_rollouts(bulk_sync) -> (2) SelectExperiences(the team's policy)
        -> (3) ConcatBatches(train_batch_size) -> (4) StandardizeFields([advantages])
        -> (5) TrainOneStep(num_sgd_iter, sgd_minibatch_size) -> (6) UpdateKL
        -> (7) standard_metrics_reporting

The value normalization's statistics move in step (5) (every minibatch's targets, before its
loss) and reach the workers with the weights.
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.mappo.config import MAPPOConfig
from rlflow.algorithms.ppo.plan import ppo_plan
from rlflow.flow import LocalIterator
from rlflow.workers import WorkerSet

__all__ = ["mappo_plan"]


def mappo_plan(workers: WorkerSet, config: MAPPOConfig) -> LocalIterator[dict[str, Any]]:
    """Build the MAPPO plan over ``workers``: PPO's (`rlflow.algorithms.ppo.ppo_plan`) on the
    team's rows, where MAPPO's policy makes the difference (per-agent clipped ratios, the
    centralized critic's GAE, normalized values); each item is one iteration's result dict."""
    return ppo_plan(workers, config)

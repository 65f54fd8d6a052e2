"""The Ape-X DDPG plan: Ape-X TD3's (`rlflow.algorithms.apex_td3.plan`), which is Ape-X's::

store_op:  parallel_rollouts(async; per-worker noise) -> StoreToReplayBuffer(random shard)
           -> UpdateWorkerWeights(max_weight_sync_delay) -> hold_sampling
replay_op: replay(shards) -> hold_replay -> Enqueue(learner.inqueue)   [LearnerThread]
update_op: dequeue(learner.outqueue) -> RecordStepsTrained -> UpdateReplayPriorities
concurrently(store_op, replay_op, update_op; async) -> standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.apex_ddpg.config import ApexDDPGConfig
from rlflow.algorithms.apex_td3.plan import apex_td3_plan
from rlflow.flow import LocalIterator
from rlflow.workers import WorkerSet

__all__ = ["apex_ddpg_plan"]


def apex_ddpg_plan(workers: WorkerSet, config: ApexDDPGConfig) -> LocalIterator[dict[str, Any]]:
    """Build the Ape-X DDPG plan over ``workers``: Ape-X TD3's with DDPG's config."""
    return apex_td3_plan(workers, config)

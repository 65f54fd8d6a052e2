"""The VDN plan: QMIX's (DQN's over the team's sequences)::

store_op:  (1) parallel_rollouts(bulk_sync) -> (2) StoreToReplayBuffer (sequences folded)
replay_op: (3) replay(learning_starts) -> (4) TrainOneStep (agents, summed)
           -> (5) UpdateReplayPriorities -> (6) UpdateTargetNetwork(target_network_update_freq)
(7) concurrently(store_op, replay_op; round robin) -> (8) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.qmix.plan import qmix_plan
from rlflow.algorithms.vdn.config import VDNConfig
from rlflow.flow import LocalIterator
from rlflow.workers import WorkerSet

__all__ = ["vdn_plan"]


def vdn_plan(workers: WorkerSet, config: VDNConfig) -> LocalIterator[dict[str, Any]]:
    """Build the VDN plan over ``workers``: QMIX's."""
    return qmix_plan(workers, config)

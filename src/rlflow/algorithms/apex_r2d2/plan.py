"""The Ape-X R2D2 plan: Ape-X's, its replay shards of sequences.

`rlflow.algorithms.q_learning.replay.replay_shard_spec` makes shards of sequences for a config
with a ``replay_sequence_length`` (`rlflow.replay.ReplayShardSpec.sequence_length`): each shard
stores the sequences it gets (`rlflow.replay.SequenceReplayBuffer`), replays whole
sequences by priority and takes their new priorities (the learner's per-sequence `TD_ERROR`).
Everything else is Ape-X's dataflow, unchanged::

    store_op:  parallel_rollouts(async) -> StoreToReplayBuffer(random shard)
               -> UpdateWorkerWeights(max_weight_sync_delay) -> hold_sampling
    replay_op: replay(shards) -> hold_replay -> Enqueue(learner.inqueue)   [LearnerThread]
    update_op: dequeue(learner.outqueue) -> RecordStepsTrained
               -> UpdateReplayPriorities -> UpdateTargetNetwork
    concurrently(store_op, replay_op, update_op; async) -> standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.apex.plan import apex_plan
from rlflow.algorithms.apex_r2d2.config import ApexR2D2Config
from rlflow.flow import LocalIterator
from rlflow.workers import WorkerSet

__all__ = ["apex_r2d2_plan"]


def apex_r2d2_plan(workers: WorkerSet, config: ApexR2D2Config) -> LocalIterator[dict[str, Any]]:
    """Build the Ape-X R2D2 plan over ``workers``: Ape-X's, on shards of sequences."""
    return apex_plan(workers, config)

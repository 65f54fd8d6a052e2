"""The Ape-X TD3 plan: Ape-X's dataflow, TD3's policy.

Horgan et al., "Distributed Prioritized Experience Replay" (ICLR 2018), which ran DDPG this
way; Liang et al., "RLlib Flow" (NeurIPS 2021), Fig. 8 (Ape-X)::

    store_op:  (1) parallel_rollouts(async; each worker its own noise std)
               -> (2) StoreToReplayBuffer(random shard; new rows at the shard's top priority)
               -> (3) UpdateWorkerWeights(max_weight_sync_delay)   [the actor, that worker only]
               -> (3b) hold_sampling                    [training_intensity, if set]
    replay_op: (4) replay(shards) -> hold_replay -> (5) Enqueue(learner.inqueue)
                  [LearnerThread: critics' step, the actor's every policy_delay, Polyak targets]
    update_op: (6) dequeue(learner.outqueue) -> (7) RecordStepsTrained
               -> (8) UpdateReplayPriorities [|TD error| to the source shard]
    (9) concurrently(store_op, replay_op, update_op; async, output of update_op)
         -> (10) standard_metrics_reporting

The plan is `rlflow.algorithms.apex.plan.apex_plan`, unchanged: its target step finds nothing
to do (`ApexTD3Policy.update_target`), the learner moves TD3's targets itself.
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.apex.plan import apex_plan
from rlflow.algorithms.apex_td3.config import ApexTD3Config
from rlflow.flow import LocalIterator
from rlflow.workers import WorkerSet

__all__ = ["apex_td3_plan"]


def apex_td3_plan(workers: WorkerSet, config: ApexTD3Config) -> LocalIterator[dict[str, Any]]:
    """Build the Ape-X TD3 plan over ``workers``: Ape-X's, training `ApexTD3Policy`."""
    return apex_plan(workers, config)

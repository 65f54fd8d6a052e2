"""The learner step: how a policy's weights change.

A `rlflow.policy.TorchPolicy` holds a `PolicyUpdate` (``policy.update``): the optimizer and
learning rate, one step on a batch or epochs of minibatches over its rows or whole sequences,
gradients and their application, the non-finite guard and the update counters. Its parts:
`rlflow.learner.adam` (`Adam`, on torch's multi-tensor ops), `rlflow.learner.staging` (a batch
to an accelerator in one copy; `StagedBatch`, sent ahead), `rlflow.learner.data_parallel`
(`DataParallel`: a learner's shard of each step, or its own batch under DD-PPO, and the
all-reduce of the gradients).

Where learners run is above this package: in the driver's local worker, in learner actors
(`rlflow.workers.learner_group.LearnerGroup`, ``num_learners``), or beside a plan in a thread
(`rlflow.ops.learner_thread.LearnerThread`).
"""

from rlflow.learner.adam import Adam
from rlflow.learner.data_parallel import DataParallel, open_store, serve_store, shard_bounds
from rlflow.learner.staging import HostStaging, StagedBatch
from rlflow.learner.update import POLICY_LAG, Learnable, PolicyUpdate, stats_to_host

__all__ = [
    "POLICY_LAG",
    "Adam",
    "DataParallel",
    "HostStaging",
    "Learnable",
    "PolicyUpdate",
    "StagedBatch",
    "open_store",
    "serve_store",
    "shard_bounds",
    "stats_to_host",
]

"""IMPALA: importance-weighted actor-learner architecture (Espeholt et al. 2018).

Policy: :class:`VTracePolicy` (its V-trace machinery, shared with APPO, is
`rlflow.policy.vtrace.VTracePolicyBase`). Config: :class:`IMPALAConfig`. Plan:
:func:`impala_plan`, whose stages :func:`~rlflow.ops.impala_train_op`,
:class:`~rlflow.ops.MixInReplay` and :class:`~rlflow.ops.BroadcastUpdateLearnerWeights` live
in `rlflow.ops` (APPO uses them too) and are re-exported here.
"""

from rlflow.algorithms.impala.config import IMPALAConfig
from rlflow.algorithms.impala.plan import impala_plan
from rlflow.algorithms.impala.policy import VTracePolicy
from rlflow.ops.learner import BroadcastUpdateLearnerWeights, MixInReplay, impala_train_op

__all__ = [
    "BroadcastUpdateLearnerWeights",
    "IMPALAConfig",
    "MixInReplay",
    "VTracePolicy",
    "impala_plan",
    "impala_train_op",
]

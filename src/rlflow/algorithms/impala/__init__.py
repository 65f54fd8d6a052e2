"""IMPALA: importance-weighted actor-learner architecture (Espeholt et al. 2018).

Policy: :class:`rlflow.policy.impala.VTracePolicy`. Config: :class:`IMPALAConfig`. Plan:
:func:`impala_plan` (its stages :func:`impala_train_op`, :class:`MixInReplay` and
:class:`BroadcastUpdateLearnerWeights` are shared with APPO).
"""

from rlflow.algorithms.impala.config import IMPALAConfig
from rlflow.algorithms.impala.plan import (
    BroadcastUpdateLearnerWeights,
    MixInReplay,
    impala_plan,
    impala_train_op,
)

__all__ = [
    "BroadcastUpdateLearnerWeights",
    "IMPALAConfig",
    "MixInReplay",
    "impala_plan",
    "impala_train_op",
]

"""IMPALA: importance-weighted actor-learner architecture (Espeholt et al. 2018).

Policy: :class:`VTracePolicy` (on `rlflow.algorithms.actor_learner.VTracePolicyBase`, shared with
APPO). Config: :class:`IMPALAConfig`. Plan: :func:`impala_plan`, whose dataflow
:func:`impala_train_op` APPO runs too.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.impala.config import IMPALAConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.impala.plan import impala_plan, impala_train_op
    from rlflow.algorithms.impala.policy import VTracePolicy

__all__ = ["IMPALAConfig", "VTracePolicy", "impala_plan", "impala_train_op"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"impala_plan": "plan", "impala_train_op": "plan", "VTracePolicy": "policy"}
)

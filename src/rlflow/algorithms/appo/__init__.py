"""APPO: asynchronous PPO on IMPALA's dataflow (RLlib's APPO).

Policy: :class:`APPOPolicy` (on `rlflow.algorithms.actor_learner.VTracePolicyBase`, shared with
IMPALA). Config: :class:`APPOConfig` (extends `IMPALAConfig`). Plan: :func:`appo_plan`, on
IMPALA's :func:`~rlflow.algorithms.impala.plan.impala_train_op`.
"""

from rlflow.algorithms.appo.config import APPOConfig
from rlflow.algorithms.appo.plan import appo_plan
from rlflow.algorithms.appo.policy import APPOPolicy

__all__ = ["APPOConfig", "APPOPolicy", "appo_plan"]

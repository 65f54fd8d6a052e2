"""APPO: asynchronous PPO on IMPALA's dataflow (RLlib's APPO).

Policy: :class:`APPOPolicy` (on `rlflow.algorithms.actor_learner.VTracePolicyBase`, shared with
IMPALA). Config: :class:`APPOConfig` (extends `IMPALAConfig`). Plan: :func:`appo_plan`, on
IMPALA's :func:`~rlflow.algorithms.impala.plan.impala_train_op`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.appo.config import APPOConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.appo.plan import appo_plan
    from rlflow.algorithms.appo.policy import APPOPolicy

__all__ = ["APPOConfig", "APPOPolicy", "appo_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"appo_plan": "plan", "APPOPolicy": "policy"})

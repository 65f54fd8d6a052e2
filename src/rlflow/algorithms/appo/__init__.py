"""APPO: asynchronous PPO on IMPALA's dataflow (RLlib's APPO).

Policy: :class:`rlflow.policy.impala.APPOPolicy`. Config: :class:`APPOConfig`. Plan:
:func:`appo_plan`.
"""

from rlflow.algorithms.appo.config import APPOConfig
from rlflow.algorithms.appo.plan import appo_plan

__all__ = ["APPOConfig", "appo_plan"]

"""PPO: proximal policy optimization (Schulman et al. 2017) as a dataflow plan.

Policy: :class:`rlflow.policy.PPOPolicy`. Config: :class:`PPOConfig`. Plan: :func:`ppo_plan`.
"""

from rlflow.algorithms.ppo.config import PPOConfig
from rlflow.algorithms.ppo.plan import UpdateKL, ppo_plan

__all__ = ["PPOConfig", "UpdateKL", "ppo_plan"]

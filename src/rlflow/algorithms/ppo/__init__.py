"""PPO: proximal policy optimization (Schulman et al. 2017) as a dataflow plan.

Policy: :class:`PPOPolicy`. Config: :class:`PPOConfig`. Plan: :func:`ppo_plan` (its
:class:`~rlflow.ops.UpdateKL` lives in `rlflow.ops`: ppo_dqn uses it too).
"""

from rlflow.algorithms.ppo.config import PPOConfig
from rlflow.algorithms.ppo.plan import ppo_plan
from rlflow.algorithms.ppo.policy import PPOPolicy

__all__ = ["PPOConfig", "PPOPolicy", "ppo_plan"]

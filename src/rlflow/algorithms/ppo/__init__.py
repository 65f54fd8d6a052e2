"""PPO: proximal policy optimization (Schulman et al. 2017) as a dataflow plan.

Policy: :class:`PPOPolicy`. Config: :class:`PPOConfig`. Plan: :func:`ppo_plan` (its
:class:`~rlflow.ops.UpdateKL` lives in `rlflow.ops`: ppo_dqn uses it too).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.ppo.config import PPOConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.ppo.plan import ppo_plan
    from rlflow.algorithms.ppo.policy import PPOPolicy

__all__ = ["PPOConfig", "PPOPolicy", "ppo_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"ppo_plan": "plan", "PPOPolicy": "policy"})

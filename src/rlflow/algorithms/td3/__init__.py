"""TD3: twin delayed DDPG (Fujimoto et al. 2018): twin critics, target policy smoothing,
delayed actor updates, on the replay dataflow.

Policy: :class:`TD3Policy` (on `rlflow.algorithms.twin_q.TwinQPolicy`, shared with SAC). Config:
:class:`TD3Config`. Plan: :func:`td3_plan` (DQN's replay dataflow). Box action spaces only.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.td3.config import TD3Config
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.td3.plan import td3_plan
    from rlflow.algorithms.td3.policy import TD3Policy

__all__ = ["TD3Config", "TD3Policy", "td3_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"td3_plan": "plan", "TD3Policy": "policy"})

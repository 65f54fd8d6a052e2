"""MATD3: MADDPG with TD3's fixes (Ackermann et al. 2019): twin centralized critics per member,
target policy smoothing and delayed actor updates, on the replay dataflow.

Needs ``groups`` (a team: `rlflow.envs.groups`), as MADDPG (`rlflow.algorithms.maddpg`), whose
policy, plan and exported member actors it extends. Policy: :class:`MATD3Policy`. Config:
:class:`MATD3Config`. Plan: :func:`matd3_plan`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.matd3.config import MATD3Config
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.matd3.plan import matd3_plan
    from rlflow.algorithms.matd3.policy import MATD3Policy

__all__ = ["MATD3Config", "MATD3Policy", "matd3_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"matd3_plan": "plan", "MATD3Policy": "policy"})

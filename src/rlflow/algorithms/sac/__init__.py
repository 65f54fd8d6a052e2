"""SAC: soft actor-critic (Haarnoja et al. 2018) with twin Q critics and automatic entropy
tuning, on the replay dataflow.

Policy: :class:`SACPolicy` (on `rlflow.algorithms.twin_q.TwinQPolicy`, shared with TD3). Config:
:class:`SACConfig`. Plan: :func:`sac_plan` (DQN's replay dataflow). Box action spaces only.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.sac.config import SACConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.sac.plan import sac_plan
    from rlflow.algorithms.sac.policy import SACPolicy, squashed_logp

__all__ = ["SACConfig", "SACPolicy", "sac_plan", "squashed_logp"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"sac_plan": "plan", "SACPolicy": "policy", "squashed_logp": "policy"}
)

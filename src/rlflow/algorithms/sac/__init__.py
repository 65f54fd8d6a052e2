"""SAC: soft actor-critic (Haarnoja et al. 2018) with twin Q critics and automatic entropy
tuning, on the replay dataflow.

Policy: :class:`SACPolicy` (on `rlflow.algorithms.twin_q.TwinQPolicy`, shared with TD3). Config:
:class:`SACConfig`. Plan: :func:`sac_plan` (DQN's replay dataflow). Box action spaces only.
"""

from rlflow.algorithms.sac.config import SACConfig
from rlflow.algorithms.sac.plan import sac_plan
from rlflow.algorithms.sac.policy import SACPolicy, squashed_logp

__all__ = ["SACConfig", "SACPolicy", "sac_plan", "squashed_logp"]

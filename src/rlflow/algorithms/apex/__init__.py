"""Ape-X: distributed prioritized experience replay (Horgan et al. 2018) with DQN.

Policy: :class:`rlflow.policy.dqn.DQNPolicy`. Config: :class:`ApexConfig`. Plan:
:func:`apex_plan`.
"""

from rlflow.algorithms.apex.config import ApexConfig
from rlflow.algorithms.apex.plan import apex_plan

__all__ = ["ApexConfig", "apex_plan"]

"""Ape-X: distributed prioritized experience replay (Horgan et al. 2018) with DQN.

Policy: DQN's :class:`~rlflow.algorithms.dqn.DQNPolicy` (given by the registry). Config:
:class:`ApexConfig`. Plan: :func:`apex_plan` (with its ``UpdateWorkerWeights``).
"""

from rlflow.algorithms.apex.config import ApexConfig
from rlflow.algorithms.apex.plan import apex_plan

__all__ = ["ApexConfig", "apex_plan"]

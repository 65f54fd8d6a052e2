"""Ape-X: distributed prioritized experience replay (Horgan et al. 2018) with DQN.

Policy: DQN's :class:`~rlflow.algorithms.dqn.DQNPolicy` (given by the registry). Config:
:class:`ApexConfig` (on :class:`ApexDataflowConfig`, what the plan reads whatever the policy:
Ape-X TD3's config extends it too). Plan: :func:`apex_plan` (with its ``UpdateWorkerWeights``).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.apex.config import ApexConfig, ApexDataflowConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.apex.plan import apex_plan

__all__ = ["ApexConfig", "ApexDataflowConfig", "apex_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"apex_plan": "plan"})

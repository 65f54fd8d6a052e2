"""Ape-X TD3: TD3's policy on Ape-X's dataflow (RLlib's ``APEX_DDPG``, as Horgan et al. 2018 ran
DDPG).

Rollout workers, each acting with its own fixed exploration noise (Ape-X's per-worker
epsilons, transposed to Gaussian action noise), write n-step transitions into a random replay
shard; a learner thread trains TD3's twin critics and delayed actor on prioritized batches
replayed from the shards, and their |TD errors| go back as priorities to the shard that
replayed them. ``apex_ddpg`` (`rlflow.algorithms.apex_ddpg`) is the same with DDPG's policy:
one critic, an actor update every step, no target smoothing.

Policy: :class:`ApexTD3Policy` (TD3's, with the per-worker noise and its target updates in
the learner thread). Config: :class:`ApexTD3Config`. Plan: :func:`apex_td3_plan` (Ape-X's).
Box action spaces only.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.apex_td3.config import ApexTD3Config
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.apex_td3.plan import apex_td3_plan
    from rlflow.algorithms.apex_td3.policy import ApexTD3Policy

__all__ = ["ApexTD3Config", "ApexTD3Policy", "apex_td3_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"apex_td3_plan": "plan", "ApexTD3Policy": "policy"})

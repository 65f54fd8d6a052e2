"""Ape-X DDPG: RLlib's ``APEX_DDPG`` name, DDPG's policy on Ape-X's dataflow (Horgan et al. 2018).

DDPG (Lillicrap et al. 2016) is TD3 without TD3's three changes, so `ApexDDPGConfig` is
`rlflow.algorithms.apex_td3.ApexTD3Config` with other defaults: one critic (``twin_q``
False), the actor and the targets updated at every step (``policy_delay`` 1), no target
policy smoothing (``target_noise`` 0); exploration is Gaussian, not RLlib's Ornstein-Uhlenbeck
noise. Set any of the three back and it is Ape-X TD3 again.

Policy: Ape-X TD3's :class:`~rlflow.algorithms.apex_td3.ApexTD3Policy` (given by the registry).
Config: :class:`ApexDDPGConfig`. Plan: :func:`apex_ddpg_plan` (Ape-X TD3's, Ape-X's).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.apex_ddpg.config import ApexDDPGConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): it imports torch
    from rlflow.algorithms.apex_ddpg.plan import apex_ddpg_plan

__all__ = ["ApexDDPGConfig", "apex_ddpg_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"apex_ddpg_plan": "plan"})

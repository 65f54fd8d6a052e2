"""`ApexDDPGConfig`: Ape-X TD3's settings with DDPG's defaults (RLlib's ``APEX_DDPG``).

`rlflow.algorithms.apex_td3.config.ApexTD3Config`'s fields; the defaults that make TD3 DDPG
(``twin_q`` False, ``policy_delay`` 1, ``target_noise`` 0) in the class statement below.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.apex_td3.config import ApexTD3Config

__all__ = ["ApexDDPGConfig"]


@dataclass(frozen=True, kw_only=True)
class ApexDDPGConfig(
    ApexTD3Config, defaults={"twin_q": False, "policy_delay": 1, "target_noise": 0.0}
):
    """Ape-X DDPG: one critic, actor and targets updated every step, no target smoothing."""

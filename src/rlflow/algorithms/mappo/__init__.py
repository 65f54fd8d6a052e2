"""MAPPO: multi-agent PPO with a centralized critic (Yu et al. 2022, "The Surprising
Effectiveness of PPO in Cooperative Multi-Agent Games").

A team of agents (``groups``: `rlflow.envs.groups`) learns as one policy: each member acts
from its own observation (decentralized actors, one shared network with the member's one-hot
index by default, or one each with ``share_policy: false``), and the value function reads the
global state (a centralized critic, its targets normalized by running statistics with
``use_valuenorm``). Advantages are GAE on the team reward and the team's value; each member's
probability ratio is clipped separately (``clip_per_agent``). Discrete members (a
``MultiDiscrete`` joint action; their action masks honored: masked actions are never sampled)
and Box members (Gaussian actions). Each member's actor exports alone
(`MAPPOPolicy.export_agent_models`).

Policy: :class:`MAPPOPolicy` (on `rlflow.algorithms.ppo.PPOPolicy`). Config:
:class:`MAPPOConfig` (`rlflow.algorithms.ppo.PPOConfig`'s fields and MAPPO's). Plan:
:func:`mappo_plan` (PPO's operators on the team's rows).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.mappo.config import MAPPOConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.mappo.plan import mappo_plan
    from rlflow.algorithms.mappo.policy import MAPPOPolicy

__all__ = ["MAPPOConfig", "MAPPOPolicy", "mappo_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"mappo_plan": "plan", "MAPPOPolicy": "policy"})

"""PPO + DQN in one multi-agent run: agents mapped to ``ppo_policy`` learn with PPO, those
mapped to ``dqn_policy`` with DQN, from one worker set (the paper's composition example).

Config: :class:`PPODQNConfig`. Plan: :func:`ppo_dqn_plan`. The one algorithm that imports
others: it composes PPO and DQN, so it imports their config and policy classes (and nothing
else of theirs); their shared operators come from `rlflow.ops` and `rlflow.replay`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.ppo_dqn.config import DQN_POLICY, PPO_POLICY, PPODQNConfig, ppo_dqn_mapping
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.ppo_dqn.plan import ppo_dqn_plan

__all__ = ["DQN_POLICY", "PPO_POLICY", "PPODQNConfig", "ppo_dqn_mapping", "ppo_dqn_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"ppo_dqn_plan": "plan"})

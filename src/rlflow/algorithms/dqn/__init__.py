"""DQN: deep Q-learning (Mnih et al. 2015) with double Q, dueling heads, n-step returns and
prioritized replay, as a dataflow plan.

Policy: :class:`DQNPolicy` (Ape-X uses it too, through the registry). Config:
:class:`DQNConfig` (its replay settings: `rlflow.algorithms.q_learning`). Plan: :func:`dqn_plan`,
whose replay dataflow :func:`store_and_replay` SAC and TD3 run too.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.dqn.plan import dqn_plan, store_and_replay
    from rlflow.algorithms.dqn.policy import DQNPolicy

__all__ = ["DQNConfig", "DQNPolicy", "dqn_plan", "store_and_replay"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"dqn_plan": "plan", "store_and_replay": "plan", "DQNPolicy": "policy"}
)

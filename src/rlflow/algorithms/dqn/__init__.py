"""DQN: deep Q-learning (Mnih et al. 2015) with double Q, dueling heads, n-step returns and
prioritized replay, as a dataflow plan.

Policy: :class:`rlflow.policy.dqn.DQNPolicy`. Config: :class:`DQNConfig`. Plan: :func:`dqn_plan`.
"""

from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.algorithms.dqn.plan import dqn_plan, dqn_round_robin_weights, make_replay_buffer

__all__ = ["DQNConfig", "dqn_plan", "dqn_round_robin_weights", "make_replay_buffer"]

"""DQN: deep Q-learning (Mnih et al. 2015) with double Q, dueling heads, n-step returns and
prioritized replay, as a dataflow plan.

Policy: :class:`DQNPolicy` (Ape-X uses it too, through the registry). Config:
:class:`DQNConfig`. Plan: :func:`dqn_plan`. Its replay helpers live in `rlflow.replay`
(Ape-X and ppo_dqn use them too): ``make_replay_buffer`` and ``dqn_round_robin_weights``
(`rlflow.replay.training_intensity_weights`) are re-exported here.
"""

from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.algorithms.dqn.plan import dqn_plan
from rlflow.algorithms.dqn.policy import DQNPolicy
from rlflow.replay.factory import make_replay_buffer
from rlflow.replay.factory import training_intensity_weights as dqn_round_robin_weights

__all__ = ["DQNConfig", "DQNPolicy", "dqn_plan", "dqn_round_robin_weights", "make_replay_buffer"]

"""QMIX: monotonic value function factorisation for a team of agents (Rashid et al., ICML 2018).

Centralized training, decentralized execution. A team (``groups``, `rlflow.envs.groups`) is
one agent of the env whose observation is every member's observation, action mask and the
global state; each member has a recurrent Q network (a GRU; one network shared by the members,
their one-hot id in its input, by default) that reads its own observation only, and a mixing
network, whose non-negative weights hypernetworks make from the global state, combines the
members' Q-values into Q_tot, monotonic in each. Trained end to end on the team reward with
double-Q targets from target copies of the agents and the mixer, on replayed episode
sequences; acting is epsilon-greedy per member over its legal actions. The exported policy is
one directory per member (`QMIXPolicy.export_agent_models`): the member's network alone.

Policy: :class:`QMIXPolicy`. Config: :class:`QMIXConfig` (``mixer: vdn`` is VDN,
`rlflow.algorithms.vdn`). Plan: :func:`qmix_plan`, DQN's plan over a buffer of sequences.

>>> QMIXConfig(env="two_step_game", groups={"team": ["agent_0", "agent_1"]}).mixer
'qmix'
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.qmix.config import MIXERS, QMIXConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.qmix.actor import QMIXAgentActor
    from rlflow.algorithms.qmix.model import QMixer, TeamQNetwork, VDNMixer
    from rlflow.algorithms.qmix.plan import qmix_plan
    from rlflow.algorithms.qmix.policy import QMIXPolicy

__all__ = [
    "MIXERS",
    "QMIXAgentActor",
    "QMIXConfig",
    "QMIXPolicy",
    "QMixer",
    "TeamQNetwork",
    "VDNMixer",
    "qmix_plan",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "qmix_plan": "plan",
        "QMIXPolicy": "policy",
        "QMIXAgentActor": "actor",
        "QMixer": "model",
        "TeamQNetwork": "model",
        "VDNMixer": "model",
    },
)

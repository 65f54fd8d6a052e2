"""MADDPG: multi-agent DDPG (Lowe et al. 2017) for a team of agents: decentralized actors,
centralized critics, on the replay dataflow.

Needs ``groups`` (a team: `rlflow.envs.groups`). Each member has a deterministic actor that
reads only its own observation (what it keeps at execution time, and all an export holds:
:meth:`MADDPGPolicy.export_agent_models`); each member's critic reads every member's
observation (optionally the env's global state too: ``critic_input``) and every member's
action, and learns the team reward's return. Box members explore with Gaussian noise; Discrete
members (MPE's default actions) give their critics one-hot actions, differentiable through a
straight-through Gumbel-softmax. MATD3 (`rlflow.algorithms.matd3`) adds TD3's twin critics,
target smoothing and delayed actor updates.

Policy: :class:`MADDPGPolicy`. Config: :class:`MADDPGConfig`. Plan: :func:`maddpg_plan` (DQN's
replay dataflow). Exported member actor: :class:`MemberActor`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.maddpg.config import MADDPGConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.maddpg.actor import MemberActor
    from rlflow.algorithms.maddpg.plan import maddpg_plan
    from rlflow.algorithms.maddpg.policy import MADDPGPolicy, gumbel_softmax

__all__ = ["MADDPGConfig", "MADDPGPolicy", "MemberActor", "gumbel_softmax", "maddpg_plan"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "maddpg_plan": "plan",
        "MADDPGPolicy": "policy",
        "gumbel_softmax": "policy",
        "MemberActor": "actor",
    },
)

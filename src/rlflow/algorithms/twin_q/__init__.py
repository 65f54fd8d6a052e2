"""The twin-Q family: what SAC and TD3 share (continuous actions, an actor, twin Q critics).

- `rlflow.algorithms.twin_q.config`: :class:`TwinQConfig` (on the replay settings);
- `rlflow.algorithms.twin_q.policy`: :class:`TwinQPolicy`, the critic pair, Polyak targets and
  the actor's optimizer; SAC and TD3 write the actor's loss and acting;
- `rlflow.algorithms.twin_q.actor`: :class:`TanhActor`, the exported actor.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.twin_q.config import TwinQConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.twin_q.actor import TanhActor, tanh_actor_export
    from rlflow.algorithms.twin_q.policy import TwinQPolicy

__all__ = ["TanhActor", "TwinQConfig", "TwinQPolicy", "tanh_actor_export"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"TanhActor": "actor", "tanh_actor_export": "actor", "TwinQPolicy": "policy"}
)

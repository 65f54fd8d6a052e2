"""The actor-learner family: what IMPALA and APPO share.

- `rlflow.algorithms.actor_learner.policy`: :class:`VTracePolicyBase` (sequences and V-trace
  targets on the learner's device) and :class:`VTraceTargets`;
- `rlflow.algorithms.actor_learner.ops`: the learner-side operators of their dataflow,
  :class:`MixInReplay` and :class:`BroadcastUpdateLearnerWeights`.

The dataflow itself is IMPALA's plan (`rlflow.algorithms.impala.plan.impala_train_op`), which
APPO runs too.
"""

from typing import TYPE_CHECKING

from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.actor_learner.ops import BroadcastUpdateLearnerWeights, MixInReplay
    from rlflow.algorithms.actor_learner.policy import VTracePolicyBase, VTraceTargets

__all__ = ["BroadcastUpdateLearnerWeights", "MixInReplay", "VTracePolicyBase", "VTraceTargets"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BroadcastUpdateLearnerWeights": "ops",
        "MixInReplay": "ops",
        "VTracePolicyBase": "policy",
        "VTraceTargets": "policy",
    },
)

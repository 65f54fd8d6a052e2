"""RL dataflow operators over rollout workers, one module per family.

Sources (snake_case functions that build a stream) and stages (PascalCase callables for
``for_each`` / ``combine`` / ``filter``):

- rollout (:mod:`rlflow.ops.rollout`): :func:`parallel_rollouts`, :func:`async_gradients`,
  :class:`ConcatBatches`, :class:`SelectExperiences`, :class:`StandardizeFields`;
- train (:mod:`rlflow.ops.train`): :class:`TrainOneStep`, :class:`ComputeGradients`,
  :class:`AverageGradients`, :class:`ApplyGradients`;
- metrics (:mod:`rlflow.ops.metrics`): :class:`OncePerTimeInterval`,
  :class:`OncePerTimestepsElapsed`, :class:`CollectMetrics`, :func:`standard_metrics_reporting`;
- replay (:mod:`rlflow.ops.replay`): :class:`StoreToReplayBuffer`, :func:`replay`,
  :class:`UpdateReplayPriorities`, :class:`UpdateTargetNetwork`;
- concurrency (:mod:`rlflow.ops.concurrency`): :func:`concurrently`, :class:`Enqueue`,
  :func:`dequeue`, :class:`LearnerThread`, :class:`RecordStepsTrained`,
  :class:`UpdateWorkerWeights`.

Operators talk through the plan's context (``flow.current_metrics()``), under the keys in
:mod:`rlflow.ops.keys`; they read it inside each call, never when the plan is built.
"""

from rlflow.ops import keys
from rlflow.ops.concurrency import (
    Enqueue,
    LearnerThread,
    RecordStepsTrained,
    Tagged,
    UpdateWorkerWeights,
    concurrently,
    dequeue,
)
from rlflow.ops.metrics import (
    CollectMetrics,
    OncePerTimeInterval,
    OncePerTimestepsElapsed,
    standard_metrics_reporting,
)
from rlflow.ops.replay import (
    StoreToReplayBuffer,
    UpdateReplayPriorities,
    UpdateTargetNetwork,
    replay,
)
from rlflow.ops.rollout import (
    ConcatBatches,
    SelectExperiences,
    StandardizeFields,
    async_gradients,
    parallel_rollouts,
)
from rlflow.ops.train import (
    ApplyGradients,
    AverageGradients,
    ComputeGradients,
    TrainOneStep,
    TrainResult,
)
from rlflow.workers import Gradients

__all__ = [
    "ApplyGradients",
    "AverageGradients",
    "CollectMetrics",
    "ComputeGradients",
    "ConcatBatches",
    "Enqueue",
    "Gradients",
    "LearnerThread",
    "OncePerTimeInterval",
    "OncePerTimestepsElapsed",
    "RecordStepsTrained",
    "SelectExperiences",
    "StandardizeFields",
    "StoreToReplayBuffer",
    "Tagged",
    "TrainOneStep",
    "TrainResult",
    "UpdateReplayPriorities",
    "UpdateTargetNetwork",
    "UpdateWorkerWeights",
    "async_gradients",
    "concurrently",
    "dequeue",
    "keys",
    "parallel_rollouts",
    "replay",
    "standard_metrics_reporting",
]

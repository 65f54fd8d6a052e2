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
  :func:`dequeue` (Ape-X's ``UpdateWorkerWeights`` moved to its plan; importable here);
- learner thread (:mod:`rlflow.ops.learner_thread`): :class:`LearnerThread`,
  :class:`RecordStepsTrained`, :class:`LearnerWeights` (weights stored once, sent per worker);
- learner (:mod:`rlflow.ops.learner`): :func:`impala_train_op`, :class:`MixInReplay`,
  :class:`BroadcastUpdateLearnerWeights`, :class:`UpdateKL`;
- intensity (:mod:`rlflow.ops.intensity`): :class:`KeepTrainingIntensity` (replayed per
  sampled env steps held in an asynchronous plan);
- filters (:mod:`rlflow.ops.filters`): :class:`SyncObservationFilters` (the learner merges the
  workers' observation filter deltas and broadcasts the result, once per iteration);
- learner info (:mod:`rlflow.ops.learner_info`): :func:`record_learner_info` (what every update
  operator calls with its stats) and :func:`pop_policy_lag` (the result's policy lag).

Operators talk through the plan's context (``flow.current_metrics()``), under the keys in
:mod:`rlflow.ops.keys`; they read it inside each call, never when the plan is built.
"""

from typing import Any

from rlflow.ops import keys
from rlflow.ops.concurrency import (
    Enqueue,
    Tagged,
    concurrently,
    dequeue,
)
from rlflow.ops.filters import SyncObservationFilters
from rlflow.ops.intensity import KeepTrainingIntensity
from rlflow.ops.learner import (
    BroadcastUpdateLearnerWeights,
    MixInReplay,
    UpdateKL,
    impala_train_op,
)
from rlflow.ops.learner_info import pop_policy_lag, record_learner_info
from rlflow.ops.learner_thread import LearnerThread, LearnerWeights, RecordStepsTrained
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


def __getattr__(name: str) -> Any:
    """``UpdateWorkerWeights`` moved below its one user, Ape-X's plan; kept importable from
    here, loaded on first use (PEP 562) so that this layer never imports the algorithms."""
    if name == "UpdateWorkerWeights":
        from rlflow.algorithms.apex.plan import UpdateWorkerWeights

        return UpdateWorkerWeights
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ApplyGradients",
    "AverageGradients",
    "BroadcastUpdateLearnerWeights",
    "CollectMetrics",
    "ComputeGradients",
    "ConcatBatches",
    "Enqueue",
    "KeepTrainingIntensity",
    "Gradients",
    "LearnerThread",
    "LearnerWeights",
    "MixInReplay",
    "OncePerTimeInterval",
    "OncePerTimestepsElapsed",
    "RecordStepsTrained",
    "SelectExperiences",
    "StandardizeFields",
    "StoreToReplayBuffer",
    "SyncObservationFilters",
    "Tagged",
    "TrainOneStep",
    "TrainResult",
    "UpdateKL",
    "UpdateReplayPriorities",
    "UpdateTargetNetwork",
    "UpdateWorkerWeights",
    "async_gradients",
    "concurrently",
    "dequeue",
    "impala_train_op",
    "keys",
    "parallel_rollouts",
    "pop_policy_lag",
    "record_learner_info",
    "replay",
    "standard_metrics_reporting",
]

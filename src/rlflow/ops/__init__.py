"""RL dataflow operators over rollout workers, one module per family.

Sources (snake_case functions that build a stream) and stages (PascalCase callables for
``for_each`` / ``combine`` / ``filter``):

- rollout (:mod:`rlflow.ops.rollout`): :func:`parallel_rollouts`, :func:`async_gradients`,
  :class:`ConcatBatches`, :class:`SelectExperiences`, :class:`StandardizeFields`;
- train (:mod:`rlflow.ops.train`): :class:`TrainOneStep`, :class:`ComputeGradients`,
  :class:`AverageGradients`, :class:`ApplyGradients`, :class:`UpdateKL`;
- metrics (:mod:`rlflow.ops.metrics`): :class:`OncePerTimeInterval`,
  :class:`OncePerTimestepsElapsed`, :class:`CollectMetrics`, :func:`standard_metrics_reporting`;
- replay (:mod:`rlflow.ops.replay`): :class:`StoreToReplayBuffer`, :func:`replay`,
  :class:`UpdateReplayPriorities`, :class:`UpdateTargetNetwork`;
- concurrency (:mod:`rlflow.ops.concurrency`): :func:`concurrently`, :class:`Enqueue`,
  :func:`dequeue`;
- learner thread (:mod:`rlflow.ops.learner_thread`): :class:`LearnerThread`,
  :class:`RecordStepsTrained`, :class:`LearnerWeights` (weights stored once, sent per worker);
- filters (:mod:`rlflow.ops.filters`): :class:`SyncObservationFilters` (the learner merges the
  workers' observation filter deltas and broadcasts the result, once per iteration);
- learner info (:mod:`rlflow.ops.learner_info`): :func:`record_learner_info` (what every update
  operator calls with its stats) and :func:`pop_policy_lag` (the result's policy lag).
- offline (:mod:`rlflow.ops.offline`): :func:`offline_batches` (recorded experience of
  ``input`` as a plan's source), :func:`experience` (the workers, recorded files or
  ``input_mix``: what DQN, SAC, TD3, bc and marwil read);
- self-play (:mod:`rlflow.ops.self_play`): :class:`SnapshotPolicies` (the snapshot pools and
  the win rates of a run with ``self_play``), :class:`RandomLegalPolicy`,
  :func:`measure_learner`.

Operators used by one algorithm, or by one family of algorithms, live beside its plan
(``rlflow.algorithms.<name>``, ``rlflow.algorithms.<family>``).

Operators talk through the plan's context (``flow.current_metrics()``), under the keys in
:mod:`rlflow.ops.keys`; they read it inside each call, never when the plan is built.
"""

from rlflow.ops import keys
from rlflow.ops.concurrency import (
    Enqueue,
    Tagged,
    concurrently,
    dequeue,
)
from rlflow.ops.filters import SyncObservationFilters
from rlflow.ops.learner_info import pop_policy_lag, record_learner_info
from rlflow.ops.learner_thread import LearnerThread, LearnerWeights, RecordStepsTrained
from rlflow.ops.metrics import (
    CollectMetrics,
    OncePerTimeInterval,
    OncePerTimestepsElapsed,
    standard_metrics_reporting,
)
from rlflow.ops.offline import experience, offline_batches
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
from rlflow.ops.self_play import RandomLegalPolicy, SnapshotPolicies, measure_learner
from rlflow.ops.train import (
    ApplyGradients,
    AverageGradients,
    ComputeGradients,
    TrainOneStep,
    TrainResult,
    UpdateKL,
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
    "LearnerWeights",
    "OncePerTimeInterval",
    "OncePerTimestepsElapsed",
    "RandomLegalPolicy",
    "RecordStepsTrained",
    "SelectExperiences",
    "SnapshotPolicies",
    "StandardizeFields",
    "StoreToReplayBuffer",
    "SyncObservationFilters",
    "Tagged",
    "TrainOneStep",
    "TrainResult",
    "UpdateKL",
    "UpdateReplayPriorities",
    "UpdateTargetNetwork",
    "async_gradients",
    "concurrently",
    "dequeue",
    "experience",
    "offline_batches",
    "keys",
    "measure_learner",
    "parallel_rollouts",
    "pop_policy_lag",
    "record_learner_info",
    "replay",
    "standard_metrics_reporting",
]

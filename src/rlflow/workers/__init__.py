"""Rollout workers: :class:`RolloutWorker` (vector env + policy map) and :class:`WorkerSet`
(the local learner plus remote rollout actors), and :class:`LearnerGroup` (data-parallel learner
actors, ``num_learners``).

Where to start: :meth:`RolloutWorker.sample` (postprocessed experience) and
:meth:`WorkerSet.sync_weights` (one ``put`` of the learner's weights, pushed to every actor).
Env stepping, for training and evaluation alike, is `rlflow.workers.sampler.Sampler`'s loop; its
single-agent hot loop is `rlflow.workers.vector_sampler.VectorSampler._step`.
"""

from typing import TYPE_CHECKING

from rlflow.lazy import lazy_exports
from rlflow.workers.records import Gradients, WorkerMetrics
from rlflow.workers.rollout_worker import RolloutWorker, current_worker

if TYPE_CHECKING:
    from rlflow.workers.learner_group import Learner, LearnerGroup
    from rlflow.workers.worker_set import WorkerSet

__all__ = [
    "Gradients",
    "Learner",
    "LearnerGroup",
    "RolloutWorker",
    "WorkerMetrics",
    "WorkerSet",
    "current_worker",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {"Learner": "learner_group", "LearnerGroup": "learner_group", "WorkerSet": "worker_set"},
)

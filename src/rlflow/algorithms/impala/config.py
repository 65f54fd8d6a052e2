"""`IMPALAConfig`: asynchronous actor-learner settings with V-trace (RLlib's names).

Groups: `AlgorithmConfig`'s, the family's `rlflow.algorithms.actor_learner.config.VTraceConfig`
(V-trace's clip thresholds) and, from `rlflow.config.learning`, `LossWeightsConfig`, `SGDConfig`
and `LearnerQueueConfig`; IMPALA's own fields are the sampling and broadcast settings and the
mix-in replay. Defaults: the groups', with IMPALA's own
in the class statement below (iterations of at least 1 s: a train item is one batch).
``num_workers`` must be >= 1 here: the local worker is the learner and never samples.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.actor_learner.config import VTraceConfig
from rlflow.config.learning import LearnerQueueConfig, LossWeightsConfig, SGDConfig

__all__ = ["IMPALAConfig"]


@dataclass(frozen=True, kw_only=True)
class IMPALAConfig(
    VTraceConfig,
    LossWeightsConfig,
    SGDConfig,
    LearnerQueueConfig,
    defaults={
        "rollout_fragment_length": 50,
        "train_batch_size": 500,
        "grad_clip": 40.0,
        "entropy_coeff": 0.01,
        "min_time_s_per_iteration": 1.0,
    },
):
    """IMPALA: workers sample asynchronously, a learner thread trains on V-trace targets.

    A learner batch concatenates whole worker batches up to ``train_batch_size`` env steps.
    """

    max_sample_requests_in_flight_per_worker: int = 2
    """``sample()`` requests in flight per worker, >= 1."""
    broadcast_interval: int = 1
    """Put new learner weights at most once every this many train batches, >= 1."""
    replay_proportion: float = 0.0
    """Replayed worker batches mixed in per sampled one, on average, >= 0 (0: no replay)."""
    replay_buffer_num_slots: int = 0
    """Worker batches kept for replay, >= 0; >= 1 when ``replay_proportion > 0``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("num_workers", 1)
        self._check_le("sgd_minibatch_size", "train_batch_size")
        self._check_int("max_sample_requests_in_flight_per_worker", 1)
        self._check_int("broadcast_interval", 1)
        self._check_range("replay_proportion", 0.0, float("inf"))
        self._check_int("replay_buffer_num_slots", 0)
        if self.replay_proportion > 0 and self.replay_buffer_num_slots == 0:
            raise self._bad("replay_proportion", "needs replay_buffer_num_slots >= 1")

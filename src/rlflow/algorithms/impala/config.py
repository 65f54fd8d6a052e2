"""`IMPALAConfig`: asynchronous actor-learner settings with V-trace (RLlib's names)."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.policy.entropy_schedule import EntropyScheduleConfig

__all__ = ["IMPALAConfig"]


@dataclass(frozen=True, kw_only=True)
class IMPALAConfig(EntropyScheduleConfig):
    """IMPALA: workers sample asynchronously, a learner thread trains on V-trace targets."""

    num_workers: int = 2
    """Remote rollout workers, >= 1 (the local worker is the learner and never samples)."""
    rollout_fragment_length: int = 50
    """Env steps per env in one ``sample()``, >= 1."""
    train_batch_size: int = 500
    """Env steps per learner batch (whole worker batches are concatenated), >= 1."""
    lr: float = 5e-4
    """Learning rate (Adam), > 0."""
    grad_clip: float | None = 40.0
    """Clip gradients by this global norm (> 0), or None."""
    vtrace_clip_rho_threshold: float = 1.0
    """rho_bar of V-trace: importance weights of the value targets are clipped to it, > 0."""
    vtrace_clip_pg_rho_threshold: float = 1.0
    """pg_rho_bar of V-trace: importance weights of the advantages are clipped to it, > 0."""
    vf_loss_coeff: float = 0.5
    """Weight of the value loss, >= 0."""
    entropy_coeff: float = 0.01
    """Weight of the entropy bonus, >= 0 (``entropy_coeff_schedule`` overrides it)."""
    num_sgd_iter: int = 1
    """Passes of the learner thread over each train batch, >= 1."""
    sgd_minibatch_size: int = 0
    """Rows per SGD step (contiguous slices), 0 for the whole batch; <= train_batch_size."""
    learner_queue_size: int = 16
    """Train batches waiting for the learner thread, >= 1 (full: sampling pauses)."""
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
        self._check_positive("vtrace_clip_rho_threshold")
        self._check_positive("vtrace_clip_pg_rho_threshold")
        self._check_range("vf_loss_coeff", 0.0, float("inf"))
        self._check_range("entropy_coeff", 0.0, float("inf"))
        self._check_int("num_sgd_iter", 1)
        self._check_int("sgd_minibatch_size", 0)
        self._check_le("sgd_minibatch_size", "train_batch_size")
        self._check_int("learner_queue_size", 1)
        self._check_int("max_sample_requests_in_flight_per_worker", 1)
        self._check_int("broadcast_interval", 1)
        self._check_range("replay_proportion", 0.0, float("inf"))
        self._check_int("replay_buffer_num_slots", 0)
        if self.replay_proportion > 0 and self.replay_buffer_num_slots == 0:
            raise self._bad("replay_proportion", "needs replay_buffer_num_slots >= 1")

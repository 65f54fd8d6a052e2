"""`ApexConfig`: distributed prioritized experience replay settings (Horgan et al. 2018)."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.dqn.config import DQNConfig

__all__ = ["ApexConfig"]


@dataclass(frozen=True, kw_only=True)
class ApexConfig(DQNConfig):
    """Ape-X DQN: many workers with fixed per-worker epsilons, sharded prioritized replay,
    a learner thread, and workers that compute their transitions' initial priorities."""

    num_workers: int = 2
    """Remote rollout workers, >= 1."""
    num_envs_per_worker: int = 4
    """Envs stepped in one vectorized loop inside each worker, >= 1."""
    rollout_fragment_length: int = 50
    """Env steps per env in one ``sample()``, >= 1."""
    train_batch_size: int = 512
    """Transitions per replayed train batch, >= 1 and <= buffer_size / num_replay_buffer_shards."""
    buffer_size: int = 200_000
    """Replay capacity in transitions, over all shards."""
    learning_starts: int = 5000
    """Transitions stored (over all shards) before replay starts."""
    target_network_update_freq: int = 50_000
    """Copy Q into the target network every this many env steps *trained*, >= 0."""
    n_step: int = 3
    """Steps of the n-step return, >= 1."""
    lr: float = 1e-4
    """Learning rate (Adam), > 0."""
    num_replay_buffer_shards: int = 2
    """Replay shards (actors, no CPU reserved), >= 1."""
    max_weight_sync_delay: int = 400
    """Push the learner's weights to a worker after it delivered this many env steps, >= 1."""
    learner_queue_size: int = 16
    """Replayed batches waiting for the learner thread, >= 1."""
    num_async_replay_requests: int = 4
    """Replay requests in flight per shard, >= 1."""
    num_async_rollout_requests: int = 2
    """Sample requests in flight per worker, >= 1."""
    per_worker_exploration: bool = True
    """Fixed epsilon per worker: ``worker_epsilon ** (1 + worker_epsilon_alpha * i / (N - 1))``
    for worker i = 0..N-1 (the schedule fields are then unused by the workers)."""
    worker_side_prioritization: bool = True
    """Workers compute their transitions' |TD error| as initial priorities."""
    prioritized_replay: bool = True
    """Sample by priority (the point of Ape-X)."""
    training_intensity: float | None = None
    """Replayed env steps per sampled env step, > 0, held by holding sampling or replay
    (`rlflow.ops.KeepTrainingIntensity`, slack ``intensity_slack``), so a run learns the same
    per env step on a quiet or a busy machine; None: both run free (the ratio is whatever the
    machine gives)."""
    intensity_slack: int = 0
    """How far (replayed env steps) the ratio may drift before a side is held, >= 0; 0: two
    train batches or two sampling rounds' worth at ``training_intensity``, whichever is larger."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("num_workers", 1)
        self._check_int("num_replay_buffer_shards", 1)
        self._check_int("max_weight_sync_delay", 1)
        self._check_int("learner_queue_size", 1)
        self._check_int("num_async_replay_requests", 1)
        self._check_int("num_async_rollout_requests", 1)
        per_shard = self.buffer_size // self.num_replay_buffer_shards
        if per_shard < self.train_batch_size:
            raise self._bad(
                "buffer_size",
                f"must hold train_batch_size={self.train_batch_size} transitions per shard "
                f"({self.num_replay_buffer_shards} shards get {per_shard} each)",
            )
        self._check_int("intensity_slack", 0)

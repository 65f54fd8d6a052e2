"""`DQNConfig`: deep Q-learning settings (RLlib's names and, mostly, defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config import AlgorithmConfig

__all__ = ["DQNConfig"]


@dataclass(frozen=True, kw_only=True)
class DQNConfig(AlgorithmConfig):
    """DQN: replay buffer, target network, double Q, dueling heads, n-step, prioritized replay.

    Units: "steps" are env steps sampled unless stated otherwise.
    """

    num_workers: int = 0
    """Remote rollout workers, >= 0; 0 samples on the learner (the usual DQN setup)."""
    rollout_fragment_length: int = 4
    """Env steps per env in one ``sample()``, >= 1."""
    train_batch_size: int = 32
    """Transitions per replayed train batch, >= 1 and <= buffer_size."""
    lr: float = 5e-4
    """Learning rate (Adam), > 0."""
    grad_clip: float | None = 40.0
    """Clip gradients by this global norm (> 0), or None."""
    min_steps_per_iteration: int = 1000
    """An iteration samples at least this many env steps, >= 0."""
    buffer_size: int = 50_000
    """Replay capacity in transitions, >= train_batch_size."""
    learning_starts: int = 1000
    """Transitions in the buffer before training starts, in [0, buffer_size]."""
    target_network_update_freq: int = 500
    """Copy Q into the target network every this many env steps sampled, >= 0 (0: every
    train step)."""
    n_step: int = 1
    """Steps of the n-step return, >= 1."""
    double_q: bool = True
    """Pick the bootstrap action with the online network (double DQN)."""
    dueling: bool = True
    """Dueling heads: Q = V + A - mean(A)."""
    huber_delta: float = 1.0
    """Huber loss threshold, > 0."""
    prioritized_replay: bool = True
    """Sample by priority |TD error| + eps (else uniformly)."""
    prioritized_replay_alpha: float = 0.6
    """Priority exponent, in [0, 1] (0: uniform)."""
    prioritized_replay_beta: float = 0.4
    """Initial importance-sampling exponent, in [0, 1]."""
    final_prioritized_replay_beta: float = 0.4
    """Importance-sampling exponent after annealing, in [0, 1]."""
    prioritized_replay_beta_annealing_timesteps: int = 20_000
    """Steps over which beta goes linearly from initial to final, >= 0."""
    prioritized_replay_eps: float = 1e-6
    """Added to |TD error| to make a priority, > 0."""
    initial_epsilon: float = 1.0
    """Exploration rate at step 0, in [0, 1]."""
    final_epsilon: float = 0.02
    """Exploration rate from ``epsilon_timesteps`` on, in [0, 1]."""
    epsilon_timesteps: int = 10_000
    """Steps over which epsilon falls linearly, >= 0."""
    per_worker_exploration: bool = False
    """Fixed epsilon per worker instead of the schedule (Ape-X): ``worker_epsilon ** (1 +
    worker_epsilon_alpha * i / (N - 1))`` for worker i = 0..N-1 of ``num_workers`` N."""
    worker_epsilon: float = 0.4
    """Base epsilon of the per-worker exploration, in [0, 1]."""
    worker_epsilon_alpha: float = 7.0
    """Exponent spread of the per-worker exploration, >= 0."""
    worker_side_prioritization: bool = False
    """Workers compute their transitions' |TD error| + ``prioritized_replay_eps`` as initial
    priorities (Ape-X)."""
    training_intensity: float | None = None
    """Replayed transitions per env step sampled, > 0; None: one train batch per sampling
    round. The plan turns it into round-robin weights
    (`rlflow.replay.training_intensity_weights`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("buffer_size", 1)
        if self.buffer_size < self.train_batch_size:
            raise self._bad(
                "buffer_size", f"must be >= train_batch_size={self.train_batch_size} (capacity)"
            )
        self._check_int("learning_starts", 0)
        self._check_le("learning_starts", "buffer_size")
        self._check_int("target_network_update_freq", 0)
        self._check_int("n_step", 1)
        self._check_positive("huber_delta")
        for name in (
            "prioritized_replay_alpha",
            "prioritized_replay_beta",
            "final_prioritized_replay_beta",
            "initial_epsilon",
            "final_epsilon",
            "worker_epsilon",
        ):
            self._check_range(name, 0.0, 1.0)
        self._check_int("prioritized_replay_beta_annealing_timesteps", 0)
        self._check_positive("prioritized_replay_eps")
        self._check_int("epsilon_timesteps", 0)
        self._check_range("worker_epsilon_alpha", 0.0, float("inf"))
        if self.training_intensity is not None:
            self._check_positive("training_intensity")

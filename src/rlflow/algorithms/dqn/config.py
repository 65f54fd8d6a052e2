"""`DQNConfig`: deep Q-learning settings (RLlib's names and, mostly, defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.q_learning.config import ReplayAlgorithmConfig

__all__ = ["DQNConfig"]


@dataclass(frozen=True, kw_only=True)
class DQNConfig(ReplayAlgorithmConfig):
    """DQN: replay buffer, target network, double Q, dueling heads, n-step, prioritized replay.

    The replay fields (``buffer_size``, ``learning_starts``, ``n_step``, ``prioritized_replay*``,
    ``training_intensity``, ``target_network_update_freq``) and their defaults come from
    `ReplayAlgorithmConfig`.

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
    double_q: bool = True
    """Pick the bootstrap action with the online network (double DQN)."""
    dueling: bool = True
    """Dueling heads: Q = V + A - mean(A)."""
    huber_delta: float = 1.0
    """Huber loss threshold, > 0."""
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

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_positive("huber_delta")
        for name in ("initial_epsilon", "final_epsilon", "worker_epsilon"):
            self._check_range(name, 0.0, 1.0)
        self._check_int("epsilon_timesteps", 0)
        self._check_range("worker_epsilon_alpha", 0.0, float("inf"))

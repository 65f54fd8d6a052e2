"""`DQNConfig`: deep Q-learning settings (RLlib's names and, mostly, defaults).

`rlflow.algorithms.q_learning.config.ReplayAlgorithmConfig`'s fields (`AlgorithmConfig`'s
groups, the target network's, the replay ones) plus DQN's own: the Q network's options and
exploration. Defaults: the replay family's (DQN's), with DQN's own in the class statement below
(sampling on the learner, short fragments, small replayed batches, iterations of at least
1000 env steps, RLlib's, and 1 s; a Q network of two hidden layers of 64 with relu).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.q_learning.config import PerWorkerExplorationConfig, ReplayAlgorithmConfig
from rlflow.config.model import ModelConfig

__all__ = ["DQNConfig"]


@dataclass(frozen=True, kw_only=True)
class DQNConfig(
    ReplayAlgorithmConfig,
    PerWorkerExplorationConfig,
    defaults={
        "num_workers": 0,
        "rollout_fragment_length": 4,
        "train_batch_size": 32,
        "grad_clip": 40.0,
        "min_steps_per_iteration": 1000,
        "min_time_s_per_iteration": 1.0,
        "model": ModelConfig(hidden=(64, 64), activation="relu"),
    },
):
    """DQN: replay buffer, target network, double Q, dueling heads, n-step, prioritized replay.

    Units: "steps" are env steps sampled unless stated otherwise.
    """

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
    worker_epsilon: float = 0.4
    """Base epsilon of the per-worker exploration (``per_worker_exploration``), in [0, 1]."""
    worker_epsilon_alpha: float = 7.0
    """Exponent spread of the per-worker exploration, >= 0."""
    worker_side_prioritization: bool = False
    """Workers compute their transitions' |TD error| + ``prioritized_replay_eps`` as initial
    priorities (Ape-X's default)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_positive("huber_delta")
        for name in ("initial_epsilon", "final_epsilon", "worker_epsilon"):
            self._check_range(name, 0.0, 1.0)
        self._check_int("epsilon_timesteps", 0)
        self._check_range("worker_epsilon_alpha", 0.0, float("inf"))

"""`ReplayAlgorithmConfig`: the settings of the replay-based algorithms (DQN, Ape-X, SAC, TD3).

`rlflow.algorithms.q_learning.replay` builds a plan's buffer, beta schedule and sampling/training
ratio from them; `rlflow.algorithms.twin_q.TwinQConfig` (SAC, TD3) extends it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config import AlgorithmConfig

__all__ = ["ReplayAlgorithmConfig"]


@dataclass(frozen=True, kw_only=True)
class ReplayAlgorithmConfig(AlgorithmConfig):
    """A replay buffer (uniform or prioritized) of n-step transitions, and the ratio of
    replayed to sampled transitions. Defaults are DQN's; "steps" are env steps sampled."""

    buffer_size: int = 50_000
    """Replay capacity in transitions, >= train_batch_size."""
    learning_starts: int = 1000
    """Transitions in the buffer before training starts, in [0, buffer_size]."""
    n_step: int = 1
    """Steps of the n-step return, >= 1."""
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
    target_network_update_freq: int = 500
    """Update the target network(s) every this many env steps sampled, >= 0 (0: after every
    train step): DQN copies Q into its target; SAC and TD3 Polyak-average with ``tau``."""
    training_intensity: float | None = None
    """Replayed transitions per env step sampled, > 0; None: one train batch per sampling
    round. The plan turns it into round-robin weights
    (`rlflow.replay.training_intensity_weights`); a whole number of train batches per round
    keeps the ratio exact, a fraction is drawn at random."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("buffer_size", 1)
        if self.buffer_size < self.train_batch_size:
            raise self._bad(
                "buffer_size", f"must be >= train_batch_size={self.train_batch_size} (capacity)"
            )
        self._check_int("learning_starts", 0)
        self._check_le("learning_starts", "buffer_size")
        self._check_int("n_step", 1)
        self._check_int("target_network_update_freq", 0)
        for name in (
            "prioritized_replay_alpha",
            "prioritized_replay_beta",
            "final_prioritized_replay_beta",
        ):
            self._check_range(name, 0.0, 1.0)
        self._check_int("prioritized_replay_beta_annealing_timesteps", 0)
        self._check_positive("prioritized_replay_eps")
        if self.training_intensity is not None:
            self._check_positive("training_intensity")

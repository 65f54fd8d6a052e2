"""Configs shared by the replay-based algorithms: `ReplayAlgorithmConfig` (DQN, Ape-X, SAC,
TD3) and `TwinQConfig` (SAC and TD3: continuous actions, an actor and twin Q critics).

`rlflow.replay.make_replay_buffer`, `beta_schedule` and `training_intensity_weights` read the
replay fields; `rlflow.policy.TwinQPolicy` reads `TwinQConfig`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config import AlgorithmConfig

__all__ = ["ReplayAlgorithmConfig", "TwinQConfig"]


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


@dataclass(frozen=True, kw_only=True)
class TwinQConfig(ReplayAlgorithmConfig):
    """An actor and (twin) Q critics with Polyak-averaged targets, for Box actions (SAC, TD3).

    Three learning rates, as RLlib's ``optimization`` dict has: ``lr`` is the critics'
    (RLlib's ``critic_learning_rate``), ``actor_lr`` the actor's, and SAC's ``alpha_lr`` the
    entropy temperature's. ``lr_schedule`` is not supported (it would schedule one of three).
    ``model`` options (``hidden``, ``activation``) shape the actor and each critic alike.
    """

    num_workers: int = 0
    """Remote rollout workers, >= 0; 0 samples on the learner (the usual setup)."""
    rollout_fragment_length: int = 1
    """Env steps per env in one ``sample()``, >= 1."""
    train_batch_size: int = 256
    """Transitions per replayed train batch, >= 1 and <= buffer_size."""
    lr: float = 3e-4
    """Learning rate of the critics (Adam), > 0 (RLlib's ``critic_learning_rate``)."""
    actor_lr: float = 3e-4
    """Learning rate of the actor (Adam), > 0 (RLlib's ``actor_learning_rate``)."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions, >= train_batch_size."""
    learning_starts: int = 1500
    """Transitions in the buffer before training starts, in [0, buffer_size] (RLlib's
    ``num_steps_sampled_before_learning_starts``)."""
    prioritized_replay: bool = False
    """Sample by priority |TD error| + eps (else uniformly)."""
    tau: float = 5e-3
    """Polyak coefficient of the target networks, in (0, 1]: ``target <- tau * online + (1 -
    tau) * target`` at every target update (1: a copy)."""
    target_network_update_freq: int = 0
    """Polyak-update the targets every this many env steps sampled, >= 0 (0: after every
    train step)."""
    twin_q: bool = True
    """Two critics; targets and the actor use their minimum (clipped double Q)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lr_schedule is not None:
            raise self._bad(
                "lr_schedule", "is not supported here: set lr (critics), actor_lr and alpha_lr"
            )
        self._check_positive("actor_lr")
        self._check_range("tau", 0.0, 1.0)
        if self.tau == 0:
            raise self._bad("tau", "must be a number > 0 (0 would freeze the targets)")

"""`ReplayAlgorithmConfig`: the settings of the replay-based algorithms (DQN, Ape-X, SAC, TD3).

`AlgorithmConfig`'s groups, `rlflow.config.learning.TargetNetworkConfig`, and the replay
fields declared here: the buffer (uniform or prioritized) of n-step transitions and the ratio
of replayed to sampled transitions. Defaults: DQN's (RLlib's); the algorithms set theirs in
their class statements. `rlflow.algorithms.q_learning.replay` builds a plan's buffer, beta
schedule and sampling/training ratio from them; `rlflow.algorithms.twin_q.TwinQConfig` (SAC,
TD3) extends it. `PerWorkerExplorationConfig` is the switch of Ape-X's fixed per-worker
exploration (DQN's epsilons, Ape-X TD3's action noise). `SequenceReplayConfig` is the length
of replayed sequences (R2D2, QMIX: `rlflow.replay.SequenceReplayBuffer`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config import AlgorithmConfig
from rlflow.config.group import FieldGroup
from rlflow.config.learning import ReplayStartConfig, TargetNetworkConfig

__all__ = ["PerWorkerExplorationConfig", "ReplayAlgorithmConfig", "SequenceReplayConfig"]


@dataclass(frozen=True, kw_only=True)
class ReplayAlgorithmConfig(AlgorithmConfig, TargetNetworkConfig, ReplayStartConfig):
    """A replay buffer (uniform or prioritized) of n-step transitions, and the ratio of
    replayed to sampled transitions. "Steps" are env steps sampled; ``train_batch_size`` is
    the transitions of one replayed batch."""

    buffer_size: int = 50_000
    """Replay capacity in transitions, >= train_batch_size (Ape-X: over all shards)."""
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
    training_intensity: float | None = None
    """Replayed transitions per env step sampled, > 0. How a plan keeps it:

    - synchronous plans (DQN, SAC, TD3, ppo_dqn's DQN learner) follow each sampling round with
      ``training_intensity * round steps / train_batch_size`` train batches, as round-robin
      weights (`rlflow.algorithms.q_learning.replay.training_intensity_weights`; a whole number
      keeps the ratio exact, a fraction is drawn at random so the mean is); None: one train
      batch per sampling round (the "native" ratio, ``train_batch_size`` / round steps);
    - Ape-X's asynchronous plan holds sampling while the learner is behind and replay while it
      is ahead (`rlflow.algorithms.apex.intensity.KeepTrainingIntensity`, slack
      ``intensity_slack``), so a run learns the same per env step on a quiet or a busy
      machine; None: both run free (the ratio is whatever the machine gives).
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("buffer_size", 1)
        if self.buffer_size < self.train_batch_size:
            raise self._bad(
                "buffer_size", f"must be >= train_batch_size={self.train_batch_size} (capacity)"
            )
        self._check_le("learning_starts", "buffer_size")
        self._check_int("n_step", 1)
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
class PerWorkerExplorationConfig(FieldGroup):
    """Ape-X's fixed exploration per rollout worker (Horgan et al. 2018), on or off."""

    per_worker_exploration: bool = False
    """A fixed exploration rate per rollout worker i = 0..N-1 of ``num_workers`` N instead of a
    shared one (Ape-X's default): DQN's epsilon ``worker_epsilon ** (1 + worker_epsilon_alpha *
    i / (N - 1))`` (the epsilon schedule is then unused by the workers); Ape-X TD3's Gaussian
    action noise std ``worker_noise ** (1 + worker_noise_alpha * i / (N - 1))`` (instead of
    ``exploration_noise``)."""


@dataclass(frozen=True, kw_only=True)
class SequenceReplayConfig(FieldGroup):
    """Replay of sequences for a policy with memory (R2D2, QMIX): the buffer stores and
    replays runs of consecutive steps (`rlflow.replay.SequenceReplayBuffer`)."""

    replay_sequence_length: int = 20
    """Steps per stored and replayed sequence, >= 1 (RLlib's name); ``train_batch_size`` must
    be at least this (a replayed batch is ``train_batch_size // replay_sequence_length``
    sequences)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("replay_sequence_length", 1)

"""`TwinQConfig`: the settings SAC and TD3 share: continuous actions, an actor and twin Q critics.

`rlflow.algorithms.twin_q.TwinQPolicy` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.q_learning.config import ReplayAlgorithmConfig

__all__ = ["TwinQConfig"]


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

"""`TD3Config`: twin delayed DDPG settings (RLlib's names where they exist)."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.twin_q.config import TwinQConfig

__all__ = ["TD3Config"]


@dataclass(frozen=True, kw_only=True)
class TD3Config(TwinQConfig):
    """TD3: deterministic actor, twin critics, target policy smoothing, delayed actor updates.

    The replay and twin-Q fields (``buffer_size``, ``learning_starts``, ``n_step``,
    ``prioritized_replay*``, ``training_intensity``, ``tau``, ``twin_q``, ``lr`` for the
    critics, ``actor_lr``) come from `TwinQConfig`. Noise scales are in units of the action
    Box's half-range ``(high - low) / 2`` (Fujimoto et al. write ``0.2 * max_action``).
    """

    lr: float = 1e-3
    """Learning rate of the critics (Adam), > 0 (RLlib's ``critic_lr``)."""
    actor_lr: float = 1e-3
    """Learning rate of the actor (Adam), > 0."""
    policy_delay: int = 2
    """Update the actor (and Polyak-average the targets) once every this many critic updates,
    >= 1."""
    target_noise: float = 0.2
    """Std of the Gaussian noise on the target actor's action (target policy smoothing), >= 0."""
    target_noise_clip: float = 0.5
    """Clip the smoothing noise to +-this, >= 0."""
    exploration_noise: float = 0.1
    """Std of the Gaussian noise added to the actor's action when exploring, >= 0; the result
    is clipped to the Box."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("policy_delay", 1)
        for name in ("target_noise", "target_noise_clip", "exploration_noise"):
            self._check_range(name, 0.0, float("inf"))

"""`TD3Config`: twin delayed DDPG settings (RLlib's names where they exist).

`rlflow.algorithms.twin_q.config.TwinQConfig`'s fields (and groups: the replay ones included)
plus TD3's own: the actor's delay and the noises. Defaults: TwinQ's, with TD3's own in the
class statement below (Fujimoto et al.'s learning rates).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.twin_q.config import TwinQConfig

__all__ = ["TD3Config"]


@dataclass(frozen=True, kw_only=True)
class TD3Config(TwinQConfig, defaults={"lr": 1e-3, "actor_lr": 1e-3}):
    """TD3: deterministic actor, twin critics, target policy smoothing, delayed actor updates.

    Noise scales are in units of the action Box's half-range ``(high - low) / 2`` (Fujimoto et
    al. write ``0.2 * max_action``).
    """

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

"""`MATD3Config`: MADDPG with TD3's fixes (Ackermann et al. 2019).

`rlflow.algorithms.maddpg.config.MADDPGConfig`'s fields plus TD3's delay and target smoothing
(`rlflow.algorithms.td3.config.TD3Config`'s names); twin critics per member by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.maddpg.config import MADDPGConfig

__all__ = ["MATD3Config"]


@dataclass(frozen=True, kw_only=True)
class MATD3Config(MADDPGConfig, defaults={"twin_q": True}):
    """MATD3: MADDPG with twin critics per member (the minimum in the targets), target policy
    smoothing and delayed actor and target updates.

    Box noise scales are in units of the Box's half-range ``(high - low) / 2``. For Discrete
    members, target smoothing replaces a target actor's argmax with a sample of its softmax (a
    Gumbel-max draw); ``target_noise`` and ``target_noise_clip`` apply to Box members.
    """

    policy_delay: int = 2
    """Update the actors (and Polyak-average the targets) once every this many critic updates,
    >= 1."""
    target_noise: float = 0.2
    """Box members: std of the Gaussian noise on a target actor's action (target policy
    smoothing), >= 0 (0 and Discrete members: see the class docstring)."""
    target_noise_clip: float = 0.5
    """Box members: clip the smoothing noise to +-this, >= 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("policy_delay", 1)
        for name in ("target_noise", "target_noise_clip"):
            self._check_range(name, 0.0, float("inf"))

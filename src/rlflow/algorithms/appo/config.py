"""`APPOConfig`: asynchronous PPO settings, IMPALA's plus the clipped surrogate's."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.impala.config import IMPALAConfig

__all__ = ["APPOConfig"]


@dataclass(frozen=True, kw_only=True)
class APPOConfig(IMPALAConfig):
    """APPO: IMPALA's dataflow with PPO's clipped surrogate against a target network."""

    clip_param: float = 0.4
    """Clip the ratio pi / pi_target to [1 - clip_param, 1 + clip_param], > 0."""
    use_kl_loss: bool = False
    """Add ``kl_coeff * KL(mu || pi)`` (mu: the behaviour policy) to the loss."""
    kl_coeff: float = 1.0
    """Weight of the KL term when ``use_kl_loss``, >= 0."""
    target_network_update_freq: int = 1000
    """Copy the model into the target network every this many env steps trained, >= 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_positive("clip_param")
        self._check_range("kl_coeff", 0.0, float("inf"))
        self._check_int("target_network_update_freq", 0)

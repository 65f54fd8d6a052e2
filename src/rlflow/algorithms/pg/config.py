"""`PGConfig`: vanilla policy gradient (REINFORCE) settings."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config import ActorCriticConfig
from rlflow.policy.entropy_schedule import EntropyScheduleConfig

__all__ = ["PGConfig"]


@dataclass(frozen=True, kw_only=True)
class PGConfig(EntropyScheduleConfig, ActorCriticConfig):
    """Policy gradient: advantages are discounted returns (no critic) unless ``use_critic``."""

    train_batch_size: int = 2000
    """Env steps per training batch (one gradient step each), >= 1."""
    lr: float = 1e-3
    """Learning rate (Adam), > 0."""
    use_critic: bool = False
    """Learn a value baseline: advantages become returns minus V(s)."""
    use_gae: bool = False
    """With a critic, use GAE(``lambda_``) instead of Monte-Carlo returns minus V(s)."""
    lambda_: float = 1.0
    """GAE lambda, in [0, 1] (only with ``use_gae``)."""
    vf_loss_coeff: float = 0.5
    """Weight of the value loss (only with a critic), >= 0."""
    entropy_coeff: float = 0.0
    """Weight of the entropy bonus, >= 0 (``entropy_coeff_schedule`` overrides it)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_range("vf_loss_coeff", 0.0, float("inf"))
        self._check_range("entropy_coeff", 0.0, float("inf"))

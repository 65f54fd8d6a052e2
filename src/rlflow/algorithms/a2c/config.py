"""`A2CConfig`: synchronous advantage actor-critic settings."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.pg.config import PGConfig

__all__ = ["A2CConfig"]


@dataclass(frozen=True, kw_only=True)
class A2CConfig(PGConfig):
    """A2C: policy gradient with a learned critic; optional gradient microbatching."""

    rollout_fragment_length: int = 20
    """Env steps per env in one ``sample()`` call of a worker, >= 1."""
    train_batch_size: int = 500
    """Env steps per update, >= 1."""
    lr: float = 1e-3
    """Learning rate (Adam), > 0."""
    grad_clip: float | None = 40.0
    """Clip gradients by this global norm (> 0), or None for no clipping."""
    use_critic: bool = True
    """Learn a value baseline (A2C always does; False gives plain PG)."""
    use_gae: bool = True
    """Use GAE(``lambda_``) advantages."""
    entropy_coeff: float = 0.01
    """Weight of the entropy bonus, >= 0."""
    microbatch_size: int | None = None
    """If set, compute gradients on microbatches of this many env steps and apply their
    average once ``train_batch_size`` steps are covered (>= 1, <= train_batch_size)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.microbatch_size is not None:
            self._check_int("microbatch_size", 1)
            self._check_le("microbatch_size", "train_batch_size")

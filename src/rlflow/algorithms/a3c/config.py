"""`A3CConfig`: asynchronous advantage actor-critic settings."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.pg.config import PGConfig

__all__ = ["A3CConfig"]


@dataclass(frozen=True, kw_only=True)
class A3CConfig(PGConfig):
    """A3C: each worker computes gradients on its own samples; the learner applies them as
    they arrive. ``train_batch_size`` is unused: one gradient per worker sample."""

    rollout_fragment_length: int = 20
    """Env steps per env in one ``sample()`` (one gradient each), >= 1."""
    lr: float = 1e-3
    """Learning rate (Adam), > 0."""
    grad_clip: float | None = 40.0
    """Clip gradients by this global norm (> 0), or None for no clipping."""
    use_critic: bool = True
    """Learn a value baseline."""
    use_gae: bool = True
    """Use GAE(``lambda_``) advantages."""
    entropy_coeff: float = 0.01
    """Weight of the entropy bonus, >= 0."""

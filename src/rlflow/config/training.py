"""`TrainingConfig`: the field group of the learner's batch, discount and optimizer settings.

One of the groups `rlflow.config.AlgorithmConfig` is built from: every algorithm has a train
batch, a discount, a learning rate (optionally on a schedule) and gradient clipping.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config.group import FieldGroup
from rlflow.schedules import PiecewiseSchedule

__all__ = ["TrainingConfig"]


@dataclass(frozen=True, kw_only=True)
class TrainingConfig(FieldGroup):
    """Train batch size, discount, learning rate (and its schedule) and gradient clipping."""

    train_batch_size: int = 4000
    """Env steps per training batch, >= 1. Replay algorithms (DQN, Ape-X, SAC, TD3):
    transitions per replayed batch, <= ``buffer_size``; IMPALA and APPO concatenate whole
    worker batches up to it; A3C (one gradient per worker sample) and MAML (one meta-batch of
    ``num_workers`` tasks) do not use it."""
    gamma: float = 0.99
    """Discount factor, in [0, 1]."""
    lr: float = 5e-4
    """Learning rate (Adam), > 0. MAML: the meta (outer) step's; SAC and TD3: the critics'
    (RLlib's ``critic_learning_rate``; ``actor_lr`` is the actor's)."""
    lr_schedule: list[list[float]] | None = None
    """``[[timestep, lr], ...]`` (timesteps from 0, nondecreasing; env steps sampled): the
    learner's lr, linear in between and flat after the last point; overrides ``lr``. SAC and
    TD3 refuse it (it would schedule one of their learning rates)."""
    grad_clip: float | None = None
    """Clip gradients by this global norm (> 0), or None for no clipping."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("train_batch_size", 1)
        self._check_range("gamma", 0.0, 1.0)
        self._check_positive("lr")
        if self.lr_schedule is not None:
            PiecewiseSchedule.from_points(self.lr_schedule, self._label("lr_schedule"))
        if self.grad_clip is not None:
            self._check_positive("grad_clip")

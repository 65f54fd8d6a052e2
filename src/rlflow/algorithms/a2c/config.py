"""`A2CConfig`: synchronous advantage actor-critic settings.

`rlflow.algorithms.pg.config.PGConfig`'s fields (and groups) plus ``microbatch_size``.
Defaults: PG's, with A2C's own in the class statement below (a critic with GAE, short
fragments, an entropy bonus, clipped gradients, iterations of at least 1 s: a train batch of
500 steps takes about a tenth of that on CartPole).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.pg.config import PGConfig
from rlflow.errors import ConfigError

__all__ = ["A2CConfig"]


@dataclass(frozen=True, kw_only=True)
class A2CConfig(
    PGConfig,
    defaults={
        "rollout_fragment_length": 20,
        "train_batch_size": 500,
        "grad_clip": 40.0,
        "use_critic": True,
        "use_gae": True,
        "entropy_coeff": 0.01,
        "min_time_s_per_iteration": 1.0,
    },
):
    """A2C: policy gradient with a learned critic; optional gradient microbatching.

    ``train_batch_size`` env steps make one update (``use_critic=False`` gives plain PG).
    """

    microbatch_size: int | None = None
    """If set, compute gradients on microbatches of this many env steps and apply their
    average once ``train_batch_size`` steps are covered (>= 1, <= train_batch_size)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.microbatch_size is not None:
            self._check_int("microbatch_size", 1)
            self._check_le("microbatch_size", "train_batch_size")
            if self.num_learners:
                raise ConfigError(
                    f"A2CConfig: num_learners={self.num_learners} takes whole train batches "
                    f"(TrainOneStep); microbatch_size={self.microbatch_size} averages gradients "
                    "on the driver's learner: set one of them, not both"
                )

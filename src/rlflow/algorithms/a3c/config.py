"""`A3CConfig`: asynchronous advantage actor-critic settings.

`rlflow.algorithms.pg.config.PGConfig`'s fields (and groups); no fields of its own. Defaults:
PG's, with A3C's own in the class statement below (a critic with GAE, short fragments, an
entropy bonus, clipped gradients, iterations of at least 1 s: a train item is one gradient).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.pg.config import PGConfig
from rlflow.errors import ConfigError

__all__ = ["A3CConfig"]


@dataclass(frozen=True, kw_only=True)
class A3CConfig(
    PGConfig,
    defaults={
        "rollout_fragment_length": 20,
        "grad_clip": 40.0,
        "use_critic": True,
        "use_gae": True,
        "entropy_coeff": 0.01,
        "min_time_s_per_iteration": 1.0,
    },
):
    """A3C: each worker computes gradients on its own samples; the learner applies them as
    they arrive. ``train_batch_size`` is unused: one gradient per worker sample
    (``rollout_fragment_length`` env steps per env)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_learners:
            raise ConfigError(
                f"A3CConfig: num_learners={self.num_learners}: A3C's gradients are computed by "
                "the rollout workers and applied by the driver's learner, so there is no batch "
                "to split among learner actors; use a2c or ppo with num_learners, or set "
                "num_learners=0"
            )

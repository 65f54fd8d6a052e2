"""`PGConfig`: vanilla policy gradient (REINFORCE) settings.

Groups: `rlflow.config.ActorCriticConfig` (`AlgorithmConfig`'s groups plus the advantages) and
`rlflow.config.learning.LossWeightsConfig`. Defaults: `AlgorithmConfig`'s, with PG's own in
the class statement below (no critic, so advantages are discounted returns).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config import ActorCriticConfig
from rlflow.config.learning import LossWeightsConfig

__all__ = ["PGConfig"]


@dataclass(frozen=True, kw_only=True)
class PGConfig(
    ActorCriticConfig,
    LossWeightsConfig,
    defaults={"train_batch_size": 2000, "lr": 1e-3, "use_critic": False, "use_gae": False},
):
    """Policy gradient: advantages are discounted returns (no critic) unless ``use_critic``.

    ``train_batch_size`` env steps make one gradient step.
    """

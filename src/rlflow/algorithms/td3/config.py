"""`TD3Config`: twin delayed DDPG settings (RLlib's names where they exist).

`rlflow.algorithms.twin_q.config.TwinQConfig`'s fields (and groups: the replay ones included)
plus the groups of TD3's fixes and its exploration (`DelayedTargetsConfig`,
`GaussianExplorationConfig`: the actor's delay and the noises). Defaults: TwinQ's, with TD3's
own in the class statement below (Fujimoto et al.'s learning rates).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.twin_q.config import (
    DelayedTargetsConfig,
    GaussianExplorationConfig,
    TwinQConfig,
)

__all__ = ["TD3Config"]


@dataclass(frozen=True, kw_only=True)
class TD3Config(
    DelayedTargetsConfig,  # groups first: their fields come after TwinQConfig's
    GaussianExplorationConfig,
    TwinQConfig,
    defaults={"lr": 1e-3, "actor_lr": 1e-3},
):
    """TD3: deterministic actor, twin critics, target policy smoothing, delayed actor updates.

    Noise scales are in units of the action Box's half-range ``(high - low) / 2`` (Fujimoto et
    al. write ``0.2 * max_action``).
    """

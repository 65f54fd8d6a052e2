"""`MATD3Config`: MADDPG with TD3's fixes (Ackermann et al. 2019).

`rlflow.algorithms.maddpg.config.MADDPGConfig`'s fields plus TD3's delay and target smoothing
(`rlflow.algorithms.twin_q.config.DelayedTargetsConfig`, as TD3 has them); twin critics per
member by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.maddpg.config import MADDPGConfig
from rlflow.algorithms.twin_q.config import DelayedTargetsConfig

__all__ = ["MATD3Config"]


@dataclass(frozen=True, kw_only=True)
class MATD3Config(DelayedTargetsConfig, MADDPGConfig, defaults={"twin_q": True}):
    """MATD3: MADDPG with twin critics per member (the minimum in the targets), target policy
    smoothing and delayed actor and target updates.

    Box noise scales are in units of the Box's half-range ``(high - low) / 2``. For Discrete
    members, target smoothing replaces a target actor's argmax with a sample of its softmax (a
    Gumbel-max draw); ``target_noise`` and ``target_noise_clip`` apply to Box members.
    """

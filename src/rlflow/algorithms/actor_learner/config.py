"""`VTraceConfig`: V-trace's clip thresholds, the field group IMPALA and APPO share.

`rlflow.algorithms.actor_learner.VTracePolicyBase` reads them (``self.config``); IMPALA's
config lists this group (`rlflow.algorithms.impala.config.IMPALAConfig`), APPO's extends it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config import AlgorithmConfig

__all__ = ["VTraceConfig"]


@dataclass(frozen=True, kw_only=True)
class VTraceConfig(AlgorithmConfig):
    """Off-policy correction of the actor-learner family (Espeholt et al. 2018, section 4)."""

    vtrace_clip_rho_threshold: float = 1.0
    """rho_bar of V-trace: importance weights of the value targets are clipped to it, > 0."""
    vtrace_clip_pg_rho_threshold: float = 1.0
    """pg_rho_bar of V-trace: importance weights of the advantages are clipped to it, > 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_positive("vtrace_clip_rho_threshold")
        self._check_positive("vtrace_clip_pg_rho_threshold")

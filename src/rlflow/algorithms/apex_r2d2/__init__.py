"""Ape-X R2D2: recurrent replay on Ape-X's dataflow (Kapturowski et al., ICLR 2019, as run there).

R2D2's policy and sequences (`rlflow.algorithms.r2d2`), replayed from Ape-X's sharded replay
actors by Ape-X's plan (`rlflow.algorithms.apex`): rollout workers write episode fragments with
their recurrent state, a random replay shard folds them into prioritized sequences, a learner
thread trains on the replayed sequences and their priorities go back to the shard that replayed
them.

Policy: R2D2's :class:`~rlflow.algorithms.r2d2.R2D2Policy` (given by the registry). Config:
:class:`ApexR2D2Config`. Plan: :func:`apex_r2d2_plan` (Ape-X's).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.apex_r2d2.config import ApexR2D2Config
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): it imports torch
    from rlflow.algorithms.apex_r2d2.plan import apex_r2d2_plan

__all__ = ["ApexR2D2Config", "apex_r2d2_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"apex_r2d2_plan": "plan"})

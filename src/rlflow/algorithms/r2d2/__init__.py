"""R2D2: recurrent replay distributed DQN (Kapturowski et al., ICLR 2019), as DQN's dataflow.

Policy: :class:`R2D2Policy` (DQN's with a recurrent Q network). Config: :class:`R2D2Config`.
Plan: :func:`r2d2_plan`, DQN's plan over a buffer of sequences
(`rlflow.replay.SequenceReplayBuffer`).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.r2d2.config import R2D2Config
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.r2d2.plan import r2d2_plan
    from rlflow.algorithms.r2d2.policy import R2D2Policy

__all__ = ["R2D2Config", "R2D2Policy", "r2d2_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"r2d2_plan": "plan", "R2D2Policy": "policy"})

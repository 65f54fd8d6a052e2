"""PG: vanilla policy gradient (REINFORCE; Williams 1992) as a dataflow plan.

Policy: :class:`PGPolicy` (no critic by default; A2C and A3C use it too, through the registry).
Config: :class:`PGConfig`. Plan: :func:`pg_plan`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.pg.config import PGConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.pg.plan import pg_plan
    from rlflow.algorithms.pg.policy import PGPolicy

__all__ = ["PGConfig", "PGPolicy", "pg_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"pg_plan": "plan", "PGPolicy": "policy"})

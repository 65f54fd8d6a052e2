"""PG: vanilla policy gradient (REINFORCE; Williams 1992) as a dataflow plan.

Policy: :class:`rlflow.policy.PGPolicy` (no critic by default). Config: :class:`PGConfig`.
Plan: :func:`pg_plan`.
"""

from rlflow.algorithms.pg.config import PGConfig
from rlflow.algorithms.pg.plan import pg_plan

__all__ = ["PGConfig", "pg_plan"]

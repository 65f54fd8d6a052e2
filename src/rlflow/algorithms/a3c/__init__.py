"""A3C: asynchronous advantage actor-critic (Mnih et al. 2016).

Policy: PG's :class:`~rlflow.algorithms.pg.PGPolicy` with a critic (given by the registry).
Config: :class:`A3CConfig`. Plan: :func:`a3c_plan`.
"""

from rlflow.algorithms.a3c.config import A3CConfig
from rlflow.algorithms.a3c.plan import a3c_plan

__all__ = ["A3CConfig", "a3c_plan"]

"""A3C: asynchronous advantage actor-critic (Mnih et al. 2016).

Policy: PG's :class:`~rlflow.algorithms.pg.PGPolicy` with a critic (given by the registry).
Config: :class:`A3CConfig`. Plan: :func:`a3c_plan`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.a3c.config import A3CConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.a3c.plan import a3c_plan

__all__ = ["A3CConfig", "a3c_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"a3c_plan": "plan"})

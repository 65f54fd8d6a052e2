"""A2C: synchronous advantage actor-critic (Mnih et al. 2016, synchronous variant).

Policy: PG's :class:`~rlflow.algorithms.pg.PGPolicy` with a critic (given by the registry).
Config: :class:`A2CConfig`. Plan: :func:`a2c_plan`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.a2c.config import A2CConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.a2c.plan import a2c_plan

__all__ = ["A2CConfig", "a2c_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"a2c_plan": "plan"})

"""CQL: conservative Q-learning from recorded experience (Kumar et al. 2020) on SAC's learner,
as a dataflow plan.

Policy: :class:`CQLPolicy`. Config: :class:`CQLConfig`. Plan: :func:`cql_plan`, whose source is
the recorded n-step transitions of ``input`` (a SAC or TD3 run's ``output``: `rlflow.offline`).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.cql.config import CQLConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.cql.plan import cql_plan
    from rlflow.algorithms.cql.policy import CQLPolicy

__all__ = ["CQLConfig", "CQLPolicy", "cql_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"cql_plan": "plan", "CQLPolicy": "policy"})

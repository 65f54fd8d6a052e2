"""MAML: model-agnostic meta-learning (Finn et al. 2017) as a dataflow plan.

Policy: :class:`MAMLPolicy`. Config: :class:`MAMLConfig`. Plan:
:func:`maml_plan`. :func:`adaptation_returns` measures returns before and after adaptation.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.maml.config import MAMLConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.maml.evaluate import adaptation_returns
    from rlflow.algorithms.maml.plan import (
        MAML_INFO,
        AdaptationResult,
        InnerAdaptation,
        MetaUpdate,
        RecordAdaptation,
        TaskSampler,
        maml_plan,
    )
    from rlflow.algorithms.maml.policy import MAMLPolicy

__all__ = [
    "MAML_INFO",
    "AdaptationResult",
    "InnerAdaptation",
    "MAMLConfig",
    "MAMLPolicy",
    "MetaUpdate",
    "RecordAdaptation",
    "TaskSampler",
    "adaptation_returns",
    "maml_plan",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "adaptation_returns": "evaluate",
        "MAML_INFO": "plan",
        "AdaptationResult": "plan",
        "InnerAdaptation": "plan",
        "MetaUpdate": "plan",
        "RecordAdaptation": "plan",
        "TaskSampler": "plan",
        "maml_plan": "plan",
        "MAMLPolicy": "policy",
    },
)

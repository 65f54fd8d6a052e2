"""`ARSPolicy`: the family's flat policy, linear by default and started at zero."""

from __future__ import annotations

from typing import ClassVar

from rlflow.algorithms.ars.config import ARSConfig
from rlflow.algorithms.perturbation.policy import FlatPolicy

__all__ = ["ARSPolicy"]


class ARSPolicy(FlatPolicy):
    """``a = M x + c`` on the filtered observation ``x`` (``model.hidden=[]``; a small MLP with
    ``model.hidden``), all parameters zero at the start (Mania et al.); updated by plain SGD on
    the driver (`rlflow.algorithms.ars.ars_plan`)."""

    config_class: ClassVar[type[ARSConfig]] = ARSConfig
    zero_init: ClassVar[bool] = True

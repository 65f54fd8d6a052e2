"""MARWIL: advantage-weighted imitation from recorded experience (Wang et al. 2018) as a
dataflow plan.

Policy: :class:`MARWILPolicy` (behaviour cloning when ``beta`` is 0: the ``bc`` algorithm uses
it through the registry). Config: :class:`MARWILConfig`. Plan: :func:`marwil_plan`, whose
source is the files of ``input`` (written by any run with ``output``: `rlflow.offline`).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.marwil.config import MARWILConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.marwil.plan import MarwilReturns, marwil_plan
    from rlflow.algorithms.marwil.policy import MARWILPolicy

__all__ = ["MARWILConfig", "MARWILPolicy", "MarwilReturns", "marwil_plan"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"marwil_plan": "plan", "MarwilReturns": "plan", "MARWILPolicy": "policy"}
)

"""BC: behaviour cloning from recorded experience, as a dataflow plan.

Policy: MARWIL's `rlflow.algorithms.marwil.MARWILPolicy` with ``beta`` 0 (given by the
registry). Config: :class:`BCConfig`. Plan: :func:`bc_plan`, whose source is the files of
``input`` (written by any run with ``output``: `rlflow.offline`).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.bc.config import BCConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): it imports torch
    from rlflow.algorithms.bc.plan import bc_plan

__all__ = ["BCConfig", "bc_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"bc_plan": "plan"})

"""ARS: augmented random search (Mania et al. 2018, "Simple random search provides a
competitive approach to reinforcement learning"; RLlib's ``ARS``) as a dataflow plan.

ES's dataflow with ARS's update: a linear policy (or a small MLP, ``model.hidden``) on
normalized observations (``MeanStdFilter``, V2), the top ``rollouts_used`` of
``num_rollouts`` directions (V2-t) scaled by the std of their returns, and the same shared
noise table (`rlflow.data.noise`). Discrete and 1-D Box actions, 1-D Box observations;
``num_workers`` >= 1.

Policy: :class:`ARSPolicy`. Config: :class:`ARSConfig`. Plan: :func:`ars_plan`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.ars.config import ARSConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.ars.plan import ARSUpdate, ars_plan, ars_step
    from rlflow.algorithms.ars.policy import ARSPolicy

__all__ = ["ARSConfig", "ARSPolicy", "ARSUpdate", "ars_plan", "ars_step"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {"ARSUpdate": "plan", "ars_plan": "plan", "ars_step": "plan", "ARSPolicy": "policy"},
)

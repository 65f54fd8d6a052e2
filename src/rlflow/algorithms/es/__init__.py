"""ES: evolution strategies (Salimans et al. 2017, "Evolution Strategies as a Scalable
Alternative to Reinforcement Learning"; RLlib's ``ES``) as a dataflow plan.

No gradient and no learner: remote workers evaluate antithetic perturbations of a small MLP's
flat parameters, named by indices into a noise table that lives once per node in the object
store (`rlflow.data.noise`); the driver ranks the returns, forms the update from the indices and
takes an Adam step. Discrete and 1-D Box actions, 1-D Box observations; ``num_workers`` >= 1.

Policy: :class:`ESPolicy`. Config: :class:`ESConfig`. Plan: :func:`es_plan`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.es.config import ESConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.es.plan import ESUpdate, es_gradient, es_plan
    from rlflow.algorithms.es.policy import ESPolicy

__all__ = ["ESConfig", "ESPolicy", "ESUpdate", "es_gradient", "es_plan"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {"ESUpdate": "plan", "es_gradient": "plan", "es_plan": "plan", "ESPolicy": "policy"},
)

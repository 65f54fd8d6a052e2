"""`ESPolicy`: the family's flat policy with Adam as the driver's optimizer of theta."""

from __future__ import annotations

from typing import ClassVar

from rlflow.algorithms.es.config import ESConfig
from rlflow.algorithms.perturbation.flat import Adam
from rlflow.algorithms.perturbation.policy import FlatPolicy

__all__ = ["ESPolicy"]


class ESPolicy(FlatPolicy):
    """A deterministic MLP (``model.hidden``, ``model.activation``) of flat parameters; its
    theta is updated by Adam (``stepsize``) on the driver (`rlflow.algorithms.es.es_plan`)."""

    config_class: ClassVar[type[ESConfig]] = ESConfig

    def make_flat_optimizer(self) -> Adam:
        """Adam with ``stepsize`` over theta."""
        assert isinstance(self.config, ESConfig)
        return Adam(self.num_flat, self.config.stepsize)

"""Torch networks and action distributions.

Where to start: :func:`build_model` turns an observation and action space into an
:class:`ActorCritic` whose ``forward(obs)`` returns ``(dist_inputs, value)``, and
:func:`dist_class_for` gives the distribution class that reads those ``dist_inputs``
(:class:`Categorical`, :class:`DiagGaussian`, :class:`MultiCategorical`). A user's network with
the same interface replaces the `ActorCritic` through the config's ``model.custom_model``
(`rlflow.models.custom`). ``model.use_lstm`` / ``use_gru`` give :class:`RecurrentActorCritic`,
a policy with memory (`rlflow.models.recurrent`).
"""

from rlflow.models.distributions import (
    ActionDistribution,
    Categorical,
    DiagGaussian,
    MultiCategorical,
    dist_class_for,
)
from rlflow.models.nets import MLP, ActorCritic, NatureCNN, build_model, layer_init
from rlflow.models.recurrent import RecurrentActorCritic

__all__ = [
    "MLP",
    "ActionDistribution",
    "ActorCritic",
    "Categorical",
    "DiagGaussian",
    "MultiCategorical",
    "NatureCNN",
    "RecurrentActorCritic",
    "build_model",
    "dist_class_for",
    "layer_init",
]

"""Torch networks and action distributions.

Where to start: :func:`build_model` turns an observation and action space into an
:class:`ActorCritic` whose ``forward(obs)`` returns ``(dist_inputs, value)``, and
:func:`dist_class_for` gives the distribution class that reads those ``dist_inputs``
(:class:`Categorical`, :class:`DiagGaussian`, :class:`MultiCategorical`). A user's network with
the same interface replaces the `ActorCritic` through the config's ``model.custom_model``
(`rlflow.models.custom`). ``model.use_lstm`` / ``use_gru`` give :class:`RecurrentActorCritic`,
a policy with memory (`rlflow.models.recurrent`); what it carries between steps, as the
samplers and the batches see it, is `rlflow.models.memory` (no torch).

The names below are imported on first use (`rlflow.lazy`): the rollout workers' modules import
`rlflow.models.memory` without torch.
"""

from typing import TYPE_CHECKING

from rlflow.lazy import lazy_exports

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ActionDistribution": "distributions",
        "Categorical": "distributions",
        "DiagGaussian": "distributions",
        "MultiCategorical": "distributions",
        "dist_class_for": "distributions",
        "MLP": "nets",
        "ActorCritic": "nets",
        "NatureCNN": "nets",
        "build_model": "nets",
        "layer_init": "nets",
        "RecurrentActorCritic": "recurrent",
    },
)

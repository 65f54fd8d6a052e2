"""Exportable actors: networks that turn observations into actions by themselves.

A trained policy is exported (`rlflow.export`) as its actor: an :class:`ExportableActor`
subclass, the JSON options that rebuild it (``cls(observation_space, action_space,
**options)``) and its weights. Loading needs only the class, never the policy, its config or a
worker. A policy says what it exports with ``export_model() -> ActorExport``; the base
`rlflow.policy.TorchPolicy` exports its :class:`~rlflow.models.ActorCritic` as
:class:`ActorCriticActor`, DQN its Q network (`rlflow.algorithms.dqn.policy.QActor`). A policy
with another model writes its own subclass and ``export_model``.

Every subclass is registered under ``"module.QualName"`` when its class statement runs, and
that name is what an export records; :func:`actor_class` finds it again (importing the module
only when it is part of rlflow, so an export file never makes a loader import other code).
"""

from __future__ import annotations

import abc
import importlib
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy.typing as npt
import torch
from torch import nn

from rlflow.errors import ConfigError
from rlflow.models.distributions import ActionDistribution, dist_class_for
from rlflow.models.nets import ACTIVATIONS, MLP, ActorCritic

__all__ = [
    "MOVED_ACTOR_CLASSES",
    "ActorCriticActor",
    "ActorExport",
    "ExportableActor",
    "actor_class",
    "class_path",
]


def class_path(cls: type) -> str:
    """``"module.QualName"`` of ``cls``: the name an export records."""
    return f"{cls.__module__}.{cls.__qualname__}"


class ExportableActor(nn.Module, abc.ABC):
    """A network that maps a batch of observations to actions, rebuilt from JSON options.

    Subclasses take ``(observation_space, action_space, **options)`` in their constructor, with
    JSON values as options (numbers, strings, booleans, lists), and write :meth:`act`. Their
    ``state_dict()`` is what an export stores.
    """

    registry: ClassVar[dict[str, type[ExportableActor]]] = {}
    """Every subclass by :func:`class_path` (filled as subclasses are defined)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register ``cls`` in :attr:`registry`."""
        super().__init_subclass__(**kwargs)
        ExportableActor.registry[class_path(cls)] = cls

    @abc.abstractmethod
    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """Actions ``[B, ...]`` (on CPU) for observations ``[B, *obs_shape]``: the greedy ones,
        or with ``explore`` sampled with ``generator``; called without gradients."""

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor | None:
        """What the greedy action is chosen from, ``[B, D]``, for observations ``[B,
        *obs_shape]``: the action distribution's inputs (logits; a Gaussian's mean and
        log-std), a Q network's values, a deterministic actor's outputs before squashing. None
        (the default): the actor shows none (an ONNX export then has only ``actions``)."""
        return None


class ActorExport(NamedTuple):
    """What a policy exports (``policy.export_model()``): how to rebuild its actor, and weights."""

    actor_class: type[ExportableActor]
    """The actor's class; rebuilt as ``actor_class(observation_space, action_space,
    **options)``."""
    options: dict[str, Any]
    """JSON-able keyword arguments of the constructor."""
    weights: dict[str, npt.NDArray[Any]]
    """The actor's ``state_dict`` as numpy arrays."""
    observation_space: gym.Space[Any] | None = None
    """The observation space the actor acts from, when not the policy's (a team member's own,
    `export_agent_models`); None: the policy's."""
    action_space: gym.Space[Any] | None = None
    """The actor's action space, when not the policy's (a team member's own); None: the
    policy's."""


class ActorCriticActor(ActorCritic, ExportableActor):
    """The :class:`~rlflow.models.ActorCritic` of a `TorchPolicy`, acting on its own: the
    action distribution's mode (argmax of the logits, the Gaussian's mean), or a sample.

    Same constructor options as `ActorCritic` (``hidden``, ``activation``, ``shared``), same
    parameter names, so a policy's ``get_weights()`` load into it as they are.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        hidden: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        shared: bool = False,
    ) -> None:
        """Build the network as `ActorCritic` does (weights are loaded afterwards)."""
        hidden = tuple(int(h) for h in hidden)
        super().__init__(
            observation_space, action_space, hidden=hidden, activation=activation, shared=shared
        )
        self.dist_class: type[ActionDistribution] = dist_class_for(action_space)
        """The distribution the policy acted with."""

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The action distribution's inputs."""
        dist_inputs, _ = self.forward(obs)
        return dist_inputs

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """The mode of the action distribution, or a sample from it with ``explore``."""
        dist_inputs, _ = self.forward(obs)
        dist = self.dist_class(dist_inputs.cpu(), generator=generator)
        return dist.sample() if explore else dist.deterministic()

    @staticmethod
    def export_of(
        model: ActorCritic, observation_space: gym.Space[Any], action_space: gym.Space[Any]
    ) -> ActorExport:
        """The export of a policy's ``model``: its options read back from its layers (hidden
        widths, activation, shared trunk) and its weights."""
        weights = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
        return ActorExport(ActorCriticActor, _actor_critic_options(model), weights)


def _actor_critic_options(model: ActorCritic) -> dict[str, Any]:
    """The ``hidden``, ``activation`` and ``shared`` options ``model`` was built with (an
    image model ignores them: its CNN is fixed)."""
    if model.is_image:
        return {"hidden": [], "activation": "tanh", "shared": True}
    shared = isinstance(model.trunk, MLP)
    mlp = model.trunk if shared else model.pi
    layers = list(mlp.net) if isinstance(mlp, MLP) else []
    hidden = [int(layer.out_features) for layer in layers if isinstance(layer, nn.Linear)]
    if not shared:
        hidden = hidden[:-1]  # the policy MLP ends with its head
    names = {cls: name for name, cls in ACTIVATIONS.items()}
    acts = [names[type(layer)] for layer in layers if type(layer) in names]
    return {"hidden": hidden, "activation": acts[0] if acts else "tanh", "shared": shared}


MOVED_ACTOR_CLASSES = {
    "rlflow.policy.tanh_actor.TanhActor": "rlflow.algorithms.twin_q.actor.TanhActor",
}
"""Where actor classes recorded by older exports live now (old ``"module.QualName"`` -> new):
exports on disk keep loading after a class moved."""


def actor_class(name: str) -> type[ExportableActor]:
    """The registered :class:`ExportableActor` subclass ``name`` (``"module.QualName"``; a name in
    :data:`MOVED_ACTOR_CLASSES` is read as the class's current one).

    A name under ``rlflow.`` has its module imported first; any other must have been imported
    by the caller (an export file never decides what a loader imports). `ConfigError` if
    unknown.
    """
    name = MOVED_ACTOR_CLASSES.get(name, name)
    cls = ExportableActor.registry.get(name)
    module = name.rpartition(".")[0]
    if cls is None and name.startswith("rlflow."):
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ConfigError(f"actor class {name!r}: its module does not import ({err})") from err
        cls = ExportableActor.registry.get(name)
    if cls is None:
        raise ConfigError(
            f"actor class {name!r} is not a known ExportableActor; import {module!r} (the module "
            "defining it) before loading"
        )
    return cls

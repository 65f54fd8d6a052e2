"""Custom models: a user's ``torch.nn.Module`` in place of the built-in `ActorCritic`.

A config's ``model`` (`rlflow.config.model.ModelConfig`) names the class and its options
(RLlib's keys)::

    PPOConfig(model={"custom_model": "my_package.models:MyModel",   # or the class itself
                     "custom_model_config": {"width": 128}})

The class has the small interface of :class:`~rlflow.models.nets.ActorCritic`, which is what
the actor-critic policies (PG, A2C, A3C, PPO, IMPALA, APPO) call::

    class MyModel(torch.nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config): ...
        def forward(self, obs):   # -> (dist_inputs [B, num_outputs], value [B])
        def value(self, obs):     # -> value [B]

- ``obs``: a batch of raw observations ``[B, *obs_space.shape]`` as the env gives them (float32;
  uint8 images stay uint8; ``Discrete`` observations are int64 ``[B]``; Dict and Tuple
  observations arrive flattened, `rlflow.envs.flatten`).
- ``num_outputs``: the width of the action distribution's inputs
  (`rlflow.models.distributions`): ``n`` logits for ``Discrete(n)``, ``sum(nvec)`` for
  ``MultiDiscrete``, ``2 * dim`` for a 1-D ``Box`` (the means, then the log-stds).
- ``model_config``: the run's ``model`` as a plain dict of all its fields
  (`ModelConfig.to_dict`, RLlib's ``model_config``); the class's own options are
  ``model_config["custom_model_config"]`` (``{}`` when not given).

A custom model with memory (PG, A2C, A3C, PPO, IMPALA, APPO) has ``initial_state(batch_size)`` and
``forward(obs [B, T, ...], state, prev_actions, prev_rewards) -> (dist_inputs [B, T,
num_outputs], value [B, T], state)`` instead of ``value`` (`rlflow.models.recurrent`); learning
cuts episodes into sequences of at most ``model.max_seq_len`` steps.

The model is built under the policy's seed; its ``state_dict`` is its weights (synced to the
rollout workers, saved in checkpoints). A policy exports it as :class:`CustomModelActor` (one
with memory as :class:`RecurrentCustomModelActor`; `rlflow.load_policy`) when the class is
importable by name, i.e. defined at the top level of a module other than ``__main__``; the
loading process imports that module itself first.
DQN, Ape-X, SAC and TD3 build their own networks and refuse ``custom_model``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlflow.config.model import ModelConfig, custom_model_class
from rlflow.errors import ConfigError
from rlflow.models.actors import ActorCriticActor, ActorExport, ExportableActor
from rlflow.models.distributions import ActionDistribution, dist_class_for
from rlflow.models.masking import (
    ActionMaskedModel,
    MaskedActor,
    masked_network,
    unmasked_space,
)
from rlflow.models.nets import ActorCritic, build_model
from rlflow.models.recurrent import (
    RecurrentActor,
    RecurrentActorCritic,
    StatefulActor,
    is_recurrent,
)

__all__ = [
    "CUSTOM_MODEL",
    "CustomModelActor",
    "RecurrentCustomModelActor",
    "build_custom_model",
    "build_policy_model",
    "custom_model_path",
    "export_policy_model",
    "resolve_custom_model",
]

CUSTOM_MODEL = "model.custom_model"
"""The config key named by every error about a custom model."""


def resolve_custom_model(spec: Any) -> type[nn.Module]:
    """The class ``spec`` names: a ``"package.module:Class"`` string (imported) or the class
    itself; `ConfigError` naming ``model.custom_model`` unless it is an ``nn.Module`` subclass
    with a ``value`` method (`rlflow.config.model.custom_model_class`)."""
    cls: type[nn.Module] = custom_model_class(spec, CUSTOM_MODEL)
    return cls


def _dummy_obs(space: gym.Space[Any]) -> torch.Tensor:
    """A batch of one zero observation of ``space`` (in the dtype a policy feeds)."""
    dtype = np.float32 if np.dtype(space.dtype or np.float32).kind == "f" else space.dtype
    return torch.from_numpy(np.zeros((1, *(space.shape or ())), dtype=dtype))


def _check_recurrent_outputs(model: nn.Module, obs: torch.Tensor, num_outputs: int) -> None:
    """`_check_outputs` of a recurrent model: ``forward(obs [1, 1, ...], initial_state(1))``
    must give ``([1, 1, num_outputs], [1, 1], state)`` with the state's shapes kept."""
    name = type(model).__name__
    state = model.initial_state(1)  # type: ignore[operator]
    out = model(obs[:, None], state, None, None)
    ok = (
        isinstance(out, tuple)
        and len(out) == 3
        and tuple(out[0].shape) == (1, 1, num_outputs)
        and tuple(out[1].shape) == (1, 1)
        and [tuple(s.shape) for s in out[2]] == [tuple(s.shape) for s in state]
    )
    if not ok:
        got = [getattr(x, "shape", x) for x in out] if isinstance(out, tuple) else out
        raise ConfigError(
            f"{CUSTOM_MODEL}: {name}.forward(obs [B, T, ...], state) must return (dist_inputs "
            f"[B, T, {num_outputs}], value [B, T], state shaped as initial_state(B)); for B=T=1 "
            f"it returned {got}"
        )


@contextlib.contextmanager
def _users_code(model: nn.Module, what: str) -> Iterator[None]:
    """Run the user's model in eval mode without gradients (no batch-norm statistics move),
    its mode restored after; an error it raises (but a `ConfigError`) becomes one naming
    ``model.custom_model``, the model and ``what`` it was given."""
    training = model.training
    try:
        with torch.no_grad():
            model.train(False)
            yield
    except ConfigError:
        raise
    except Exception as err:  # the user's code: reported with its key
        raise ConfigError(
            f"{CUSTOM_MODEL}: {type(model).__name__} raised {err!r} on {what}"
        ) from err
    finally:
        model.train(training)


def _check_outputs(model: nn.Module, obs_space: gym.Space[Any], num_outputs: int) -> None:
    """Call the model once (in eval mode, without gradients) on a zero observation;
    `ConfigError` unless ``forward`` gives ``([1, num_outputs], [1])`` and ``value`` ``[1]``
    (a recurrent model: `_check_recurrent_outputs`)."""
    name = type(model).__name__
    obs = _dummy_obs(obs_space)
    if is_recurrent(model):
        what = f"a sequence of one zero observation of {obs_space} from initial_state(1)"
        with _users_code(model, what):
            _check_recurrent_outputs(model, obs, num_outputs)
        return
    with _users_code(model, f"a batch of one zero observation of {obs_space}"):
        out = model(obs)
        value = model.value(obs)  # type: ignore[operator]
    shapes_ok = (
        isinstance(out, tuple)
        and len(out) == 2
        and all(isinstance(x, torch.Tensor) for x in out)
        and tuple(out[0].shape) == (1, num_outputs)
        and tuple(out[1].shape) == (1,)
    )
    if not shapes_ok:
        got = [tuple(x.shape) for x in out] if isinstance(out, tuple) else type(out).__name__
        raise ConfigError(
            f"{CUSTOM_MODEL}: {name}.forward(obs [B, ...]) must return (dist_inputs [B, "
            f"{num_outputs}], value [B]); for B=1 it returned {got}"
        )
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != (1,):
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise ConfigError(f"{CUSTOM_MODEL}: {name}.value(obs) must return [B]; got {shape} for B=1")


def build_custom_model(
    obs_space: gym.Space[Any], action_space: gym.Space[Any], model_config: ModelConfig
) -> nn.Module:
    """Build ``model_config.custom_model`` for the spaces (see the module docstring; it gets
    ``model_config`` as a plain dict) and check its outputs' shapes once; `ConfigError` naming
    ``model.custom_model`` when the class cannot be built or gives wrong shapes."""
    cls = resolve_custom_model(model_config.custom_model)
    num_outputs = dist_class_for(action_space).required_input_dim(action_space)
    try:
        model = cls(obs_space, action_space, num_outputs, model_config.to_dict())
    except ConfigError:
        raise
    except Exception as err:  # the user's constructor: reported with its key
        raise ConfigError(
            f"{CUSTOM_MODEL}: {cls.__name__}(obs_space, action_space, num_outputs="
            f"{num_outputs}, model_config) raised {err!r}"
        ) from err
    _check_outputs(model, obs_space, num_outputs)
    return model


def custom_model_path(spec: Any) -> str:
    """``"module:QualName"`` of the custom model ``spec``, by which a loader finds it again;
    `ConfigError` when the class is not importable by name (``__main__``, a local class)."""
    cls = resolve_custom_model(spec)
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        raise ConfigError(
            f"cannot export a policy whose {CUSTOM_MODEL} is {cls.__qualname__} of module "
            f"{cls.__module__!r}: a loader finds the class by name, so define it at the top "
            "level of an importable module"
        )
    return f"{cls.__module__}:{cls.__qualname__}"


def _imported_class(path: str) -> type[nn.Module]:
    """The class ``"module:QualName"`` from an already imported module (never imports)."""
    module_name, _, qualname = path.partition(":")
    obj: Any = sys.modules.get(module_name)
    if obj is None:
        raise ConfigError(
            f"the exported policy's {CUSTOM_MODEL} is {path!r}: import {module_name!r} before "
            "loading it (an export never decides what a loader imports)"
        )
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if obj is None:
        raise ConfigError(
            f"the exported policy's {CUSTOM_MODEL} is {path!r}, but module {module_name!r} "
            f"has no {qualname!r}"
        )
    return resolve_custom_model(obj)


class CustomModelActor(ExportableActor):
    """A policy's custom model, acting on its own: the mode of its action distribution, or a
    sample. Options: ``custom_model`` (``"module:QualName"``, whose module the loader must have
    imported) and ``model_config`` (the run's ``model`` as a plain dict, JSON; what the class
    was built with). The user's module is
    ``self.model``, so its weights are the policy's with the prefix ``model.``.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        custom_model: str,
        model_config: dict[str, Any],
    ) -> None:
        """Build the user's class (weights are loaded afterwards)."""
        super().__init__()
        cls = _imported_class(custom_model)
        self.dist_class: type[ActionDistribution] = dist_class_for(action_space)
        """The distribution the policy acted with."""
        num_outputs = self.dist_class.required_input_dim(action_space)
        self.model = cls(observation_space, action_space, num_outputs, model_config)
        """The user's model."""

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The action distribution's inputs (the user's model's first output)."""
        dist_inputs: torch.Tensor = self.model(obs)[0]
        return dist_inputs

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """The mode of the action distribution, or a sample from it with ``explore``."""
        dist_inputs, _ = self.model(obs)
        dist = self.dist_class(dist_inputs.cpu(), generator=generator)
        return dist.sample() if explore else dist.deterministic()

    @classmethod
    def export_of(cls, model: nn.Module, model_config: ModelConfig) -> ActorExport:
        """The export of a policy's custom ``model`` built from ``model_config`` (acting as
        this class)."""
        path = custom_model_path(model_config.custom_model)
        config = {**model_config.to_dict(), "custom_model": path}
        weights = {
            f"model.{k}": v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()
        }
        options = {"custom_model": path, "model_config": config}
        return ActorExport(cls, options, weights)


class RecurrentCustomModelActor(StatefulActor, CustomModelActor):
    """A policy's recurrent custom model, acting on its own one step at a time from its state
    (`rlflow.models.recurrent.StatefulActor`); options and weights as `CustomModelActor`'s."""

    def initial_state(self, batch_size: int) -> list[torch.Tensor]:
        """The user's model's state at an episode's start, for ``batch_size`` observations."""
        return list(self.model.initial_state(batch_size))  # type: ignore[operator]

    def network_step(self, *inputs: Any) -> tuple[torch.Tensor, torch.Tensor, list[Any]]:
        """The user's model, given what a policy gives it while sampling."""
        dist_inputs, value, state = self.model(*inputs)
        return dist_inputs, value, list(state)


def build_policy_model(
    obs_space: gym.Space[Any], action_space: gym.Space[Any], model_config: ModelConfig
) -> nn.Module:
    """The network of an actor-critic policy: ``model_config.custom_model`` when set
    (:func:`build_custom_model`), the built-in `RecurrentActorCritic` with ``use_lstm`` /
    ``use_gru``, else the built-in `ActorCritic` from ``hidden``, ``activation`` and
    ``shared`` (`rlflow.models.build_model`); for observations that carry an action mask,
    wrapped in `rlflow.models.masking.ActionMaskedModel`."""

    def build(space: gym.Space[Any]) -> nn.Module:
        return _build_network(space, action_space, model_config)

    return masked_network(build, obs_space, action_space, model_config, "the policy's model")


def _build_network(
    obs_space: gym.Space[Any], action_space: gym.Space[Any], model_config: ModelConfig
) -> nn.Module:
    """The network `build_policy_model` builds for observations of ``obs_space``."""
    if model_config.custom_model is not None:
        return build_custom_model(obs_space, action_space, model_config)
    if model_config.use_lstm or model_config.use_gru:
        return RecurrentActorCritic(
            obs_space,
            action_space,
            hidden=model_config.hidden,
            activation=model_config.activation,
            cell="lstm" if model_config.use_lstm else "gru",
            cell_size=model_config.lstm_cell_size,
            use_prev_action=model_config.lstm_use_prev_action,
            use_prev_reward=model_config.lstm_use_prev_reward,
        )
    return build_model(
        obs_space,
        action_space,
        hidden=model_config.hidden,
        activation=model_config.activation,
        shared=model_config.shared,
    )


def export_policy_model(
    model: nn.Module,
    obs_space: gym.Space[Any],
    action_space: gym.Space[Any],
    model_config: ModelConfig,
) -> ActorExport:
    """The export of a network :func:`build_policy_model` made: `ActorCriticActor` for the
    built-in one, :class:`CustomModelActor` for a custom one (`ConfigError` when its class is
    not importable by name)."""
    if isinstance(model, ActionMaskedModel):  # the network's own actor, masked
        space = obs_space if model.feed_mask else unmasked_space(obs_space, model.mask_size)
        inner = export_policy_model(model.model, space, action_space, model_config)
        return MaskedActor.export_of(inner, model)
    if type(model) is RecurrentActorCritic:
        return RecurrentActor.export_of(model)
    if model_config.custom_model is not None:
        actor = RecurrentCustomModelActor if is_recurrent(model) else CustomModelActor
        return actor.export_of(model, model_config)
    if type(model) is ActorCritic:
        return ActorCriticActor.export_of(model, obs_space, action_space)
    raise ConfigError(
        f"cannot export a {type(model).__name__} model: exported models are ActorCritic and "
        "custom models (model.custom_model); give the policy class an export_model()"
    )

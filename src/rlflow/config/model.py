"""`ModelConfig`: the field group of the ``model`` dict, its keys and their rules (custom models
included).

One of the groups `rlflow.config.AlgorithmConfig` is built from; it checks ``model`` with
:func:`check_model`, before any actor starts. The built-in network reads ``hidden``,
``activation`` and ``shared`` (`rlflow.models.build_model`); a user's network is
``custom_model`` with its options ``custom_model_config`` (`rlflow.models.custom` documents the
interface).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from rlflow.config.group import FieldGroup
from rlflow.errors import ConfigError

__all__ = [
    "ACTIVATION_NAMES",
    "MODEL_KEYS",
    "RECURRENT_KEYS",
    "ModelConfig",
    "check_model",
    "custom_model_class",
    "import_object",
]

RECURRENT_KEYS = (
    "use_lstm",
    "use_gru",
    "lstm_cell_size",
    "max_seq_len",
    "lstm_use_prev_action",
    "lstm_use_prev_reward",
)
"""The keys of policies with memory (RLlib's; `rlflow.models.recurrent`): ``use_lstm`` /
``use_gru`` wrap the built-in network with a cell of ``lstm_cell_size`` units (256), fed the
previous action / reward with ``lstm_use_prev_action`` / ``lstm_use_prev_reward``; learning
cuts episodes into sequences of at most ``max_seq_len`` steps (20), also for a recurrent
custom model."""

MODEL_KEYS = (
    "hidden",
    "activation",
    "shared",
    "custom_model",
    "custom_model_config",
    "use_action_mask_as_input",
    *RECURRENT_KEYS,
)
"""The keys a config's ``model`` dict may set: the built-in network's ``hidden``, ``activation``
and ``shared`` (`rlflow.models.build_model`), or a user's network: ``custom_model``
(``"package.module:Class"`` or the class) with its options ``custom_model_config`` (a dict;
see `rlflow.models.custom`); ``use_action_mask_as_input``: feed an observation's action mask
to the network too (`rlflow.models.masking`; default false); and :data:`RECURRENT_KEYS`."""


ACTIVATION_NAMES = ("tanh", "relu", "elu")
"""The built-in network's ``activation`` names (`rlflow.models.nets.ACTIVATIONS` maps them to
torch modules)."""


def import_object(path: str, what: str) -> Any:
    """Import ``"package.module:attribute"`` (e.g. a mapping function named in a YAML file).

    >>> import_object("rlflow.config.model:MODEL_KEYS", "x")[0]
    'hidden'
    >>> import_object("rlflow.config.model", "model.custom_model")
    Traceback (most recent call last):
    ...
    rlflow.errors.ConfigError: model.custom_model='rlflow.config.model' must be written \
'package.module:name'
    """
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{what}={path!r} must be written 'package.module:name'")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"{what}={path!r}: cannot import {module_name!r} ({err})") from err
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{what}={path!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def custom_model_class(spec: Any, label: str = "model.custom_model") -> type:
    """The class ``spec`` names: ``"package.module:Class"`` (imported) or the class itself;
    `ConfigError` naming ``label`` unless it is a ``torch.nn.Module`` subclass with a ``value``
    method, or an ``initial_state`` one (a recurrent model; torch is imported only here)."""
    if not isinstance(spec, str | type):
        raise ConfigError(f"{label}={spec!r} must be 'package.module:Class' or a class")
    cls = import_object(spec, label) if isinstance(spec, str) else spec
    from torch import nn

    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ConfigError(f"{label}={spec!r} must be a torch.nn.Module subclass, got {cls!r}")
    if not callable(getattr(cls, "value", None)) and not callable(
        getattr(cls, "initial_state", None)
    ):
        raise ConfigError(
            f"{label}={spec!r}: {cls.__name__} has no value(obs) method; a custom model gives "
            "forward(obs) -> (dist_inputs, value) and value(obs) -> value (rlflow.models.custom), "
            "or, with memory, initial_state(batch_size) and forward(obs, state, prev_actions, "
            "prev_rewards) -> (dist_inputs, value, state) (rlflow.models.recurrent)"
        )
    return cls


def check_model(model: Any, label: str) -> None:
    """Raise `ConfigError` naming ``label`` (``"PPOConfig.model"``) and the key unless
    ``model`` is a dict of :data:`MODEL_KEYS` whose ``custom_model``, if any, imports and is a
    ``torch.nn.Module`` with a ``value`` method, and whose ``custom_model_config``, if any, is
    a dict given with ``custom_model``.

    >>> check_model({"custom_model_config": {"width": 8}}, "PPOConfig.model")
    Traceback (most recent call last):
    ...
    rlflow.errors.ConfigError: PPOConfig.model.custom_model_config is given without \
model.custom_model; name the model class it configures
    """
    if not isinstance(model, dict):
        raise ConfigError(f"{label}={model!r} must be a dict with keys from {MODEL_KEYS}")
    unknown = sorted(set(model) - set(MODEL_KEYS))
    if unknown:
        raise ConfigError(
            f"{label}={model!r} has unknown keys {unknown}; model keys are {MODEL_KEYS}"
        )
    _check_builtin_keys(model, label)
    custom, options = model.get("custom_model"), model.get("custom_model_config")
    if options is not None and not isinstance(options, dict):
        raise ConfigError(
            f"{label}.custom_model_config={options!r} must be a dict of the custom model's options"
        )
    if options is not None and custom is None:
        raise ConfigError(
            f"{label}.custom_model_config is given without model.custom_model; name the model "
            "class it configures"
        )
    if custom is not None:
        custom_model_class(custom, f"{label}.custom_model")


def _check_builtin_keys(model: dict[str, Any], label: str) -> None:
    """The built-in network's keys, checked where the config is built (not first when a worker
    builds the network): ``hidden`` a list of layer sizes >= 1, ``activation`` one of
    :data:`ACTIVATION_NAMES`, ``shared`` a bool, and :data:`RECURRENT_KEYS` (flags bools, sizes
    ints >= 1, one cell, and the built-in network only).

    >>> _check_builtin_keys({"hidden": [64, -1]}, "PPOConfig.model")
    Traceback (most recent call last):
    ...
    rlflow.errors.ConfigError: PPOConfig.model.hidden=[64, -1] must be a list of layer sizes, \
each an int >= 1 (e.g. [64, 64]; [] for none)
    """
    if "hidden" in model:
        hidden = model["hidden"]
        if not isinstance(hidden, list | tuple) or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in hidden
        ):
            raise ConfigError(
                f"{label}.hidden={hidden!r} must be a list of layer sizes, each an int >= 1 "
                "(e.g. [64, 64]; [] for none)"
            )
    if "activation" in model and model["activation"] not in ACTIVATION_NAMES:
        raise ConfigError(
            f"{label}.activation={model['activation']!r} is not supported; use one of "
            f"{sorted(ACTIVATION_NAMES)}"
        )
    flags = ("shared", "use_lstm", "use_gru", "lstm_use_prev_action", "lstm_use_prev_reward")
    for key in (*flags, "use_action_mask_as_input"):
        if key in model and not isinstance(model[key], bool):
            raise ConfigError(f"{label}.{key}={model[key]!r} must be true or false")
    for key in ("lstm_cell_size", "max_seq_len"):
        value = model.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{label}.{key}={value!r} must be an int >= 1")
    if model.get("use_lstm") and model.get("use_gru"):
        raise ConfigError(f"{label}: use_lstm and use_gru are both true; pick one cell")
    if (model.get("use_lstm") or model.get("use_gru")) and model.get("custom_model") is not None:
        raise ConfigError(
            f"{label}: use_lstm/use_gru wrap the built-in network, not model.custom_model; a "
            "custom model with memory gives initial_state(batch_size) and forward(obs, state, "
            "prev_actions, prev_rewards) itself (rlflow.models.recurrent)"
        )


@dataclass(frozen=True, kw_only=True)
class ModelConfig(FieldGroup):
    """The policy's network: the built-in one's shape, or a custom model."""

    model: dict[str, Any] = field(default_factory=dict)
    """Model options: ``hidden`` (tuple of layer sizes), ``activation``, ``shared``; or a
    user's network, ``custom_model`` (``"package.module:Class"`` or the class; see
    `rlflow.models.custom`) with ``custom_model_config`` (a dict of its options); memory:
    ``use_lstm`` / ``use_gru``, ``lstm_cell_size``, ``max_seq_len``, ``lstm_use_prev_action``,
    ``lstm_use_prev_reward`` (:data:`RECURRENT_KEYS`). SAC and TD3
    shape the actor and each critic alike with ``hidden`` and ``activation``. A key left out
    takes the policy's default (two hidden layers of 64)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_model(self.model, self._label("model"))

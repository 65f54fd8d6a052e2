"""`ModelConfig`: the options of a policy's network (a config's ``model``), their defaults and
rules, custom models included.

Every `rlflow.config.AlgorithmConfig` holds one in its ``model`` field; an algorithm whose
network differs sets its default model in its class statement (``defaults={"model":
ModelConfig(activation="relu")}``: DQN's). Given as a dict (a YAML ``model:`` block, ``--set
model.use_lstm=true``, ``PPOConfig(model={"hidden": [32]})``), the dict's keys are applied on
top of the algorithm's default model and checked here, before any actor starts. The built-in
network reads ``hidden``, ``activation`` and ``shared`` (`rlflow.models.build_model`), a
recurrent one also the memory fields (`rlflow.models.recurrent`); a user's network is
``custom_model`` with its options ``custom_model_config`` (`rlflow.models.custom` documents the
interface). The field names are RLlib's.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from rlflow.config.group import NestedGroup
from rlflow.errors import ConfigError

__all__ = [
    "ACTIVATION_NAMES",
    "ModelConfig",
    "custom_model_class",
    "import_object",
]


ACTIVATION_NAMES = ("tanh", "relu", "elu")
"""The built-in network's ``activation`` names (`rlflow.models.nets.ACTIVATIONS` maps them to
torch modules)."""


def import_object(path: str, what: str) -> Any:
    """Import ``"package.module:attribute"`` (e.g. a mapping function named in a YAML file).

    >>> import_object("rlflow.config.model:ACTIVATION_NAMES", "x")[0]
    'tanh'
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


_FLAGS = (
    "shared",
    "use_action_mask_as_input",
    "use_lstm",
    "use_gru",
    "lstm_use_prev_action",
    "lstm_use_prev_reward",
)


@dataclass(frozen=True, kw_only=True)
class ModelConfig(NestedGroup):
    """The policy's network: the built-in one's shape and memory, or a user's model.

    >>> ModelConfig(hidden=[32]).hidden
    (32,)
    >>> ModelConfig.from_dict({"hidden": [64, -1]}, "PPOConfig.model")
    Traceback (most recent call last):
    ...
    rlflow.errors.ConfigError: PPOConfig.model.hidden=[64, -1] must be a list of layer sizes, \
each an int >= 1 (e.g. [64, 64]; [] for none)
    """

    hidden: tuple[int, ...] = (64, 64)
    """The built-in network's hidden layer sizes, each an int >= 1 (a list is taken; ``()``:
    none). The actor-critic's policy and value MLPs (or their shared trunk), DQN's Q network,
    SAC's and TD3's actor and each critic alike; a recurrent network's trunk before its cell.
    Images go through the Nature CNN instead."""
    activation: str = "tanh"
    """The built-in network's activation, one of `ACTIVATION_NAMES` (``"tanh"``, ``"relu"``,
    ``"elu"``)."""
    shared: bool = False
    """One MLP trunk for the actor-critic's policy and value heads; False: two MLPs."""
    custom_model: str | type | None = None
    """A user's network in place of the built-in one: ``"package.module:Class"`` or the class,
    a ``torch.nn.Module`` with ``value(obs)`` (or, with memory, ``initial_state``): see
    `rlflow.models.custom`. The actor-critic algorithms take one; None: the built-in one."""
    custom_model_config: dict[str, Any] = field(default_factory=dict)
    """The custom model's own options, which its constructor reads from
    ``model_config["custom_model_config"]`` (only with ``custom_model``)."""
    use_action_mask_as_input: bool = False
    """Feed an observation's action mask to the network too (`rlflow.models.masking`); False:
    the network sees the observation without it."""
    use_lstm: bool = False
    """Wrap the built-in network with an LSTM cell of ``lstm_cell_size`` units
    (`rlflow.models.recurrent`; PG, A2C, A3C, PPO, IMPALA, APPO; R2D2's Q network has one
    unless ``use_gru``)."""
    use_gru: bool = False
    """Wrap the built-in network with a GRU cell instead (not with ``use_lstm``)."""
    lstm_cell_size: int = 256
    """Units of the LSTM or GRU cell, >= 1."""
    max_seq_len: int = 20
    """Steps per sequence a policy with memory learns on, >= 1: learning cuts episodes into
    sequences of at most this many steps (a recurrent custom model's too)."""
    lstm_use_prev_action: bool = False
    """Feed the previous action (one-hot for discrete actions) to the cell."""
    lstm_use_prev_reward: bool = False
    """Feed the previous reward to the cell."""

    def __post_init__(self, where: str | None) -> None:
        super().__post_init__()
        label = where or type(self).__name__
        self._check_builtin(label)
        self._check_custom(label)

    def _check_builtin(self, label: str) -> None:
        """The built-in network's fields: ``hidden`` layer sizes >= 1 (kept as a tuple),
        ``activation`` one of `ACTIVATION_NAMES`, the flags bools, the cell's sizes ints >= 1,
        at most one cell."""
        hidden = self.hidden
        if not isinstance(hidden, list | tuple) or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in hidden
        ):
            raise ConfigError(
                f"{label}.hidden={hidden!r} must be a list of layer sizes, each an int >= 1 "
                "(e.g. [64, 64]; [] for none)"
            )
        object.__setattr__(self, "hidden", tuple(hidden))
        if self.activation not in ACTIVATION_NAMES:
            raise ConfigError(
                f"{label}.activation={self.activation!r} is not supported; use one of "
                f"{sorted(ACTIVATION_NAMES)}"
            )
        for name in _FLAGS:
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{label}.{name}={getattr(self, name)!r} must be true or false")
        for name in ("lstm_cell_size", "max_seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{label}.{name}={value!r} must be an int >= 1")
        if self.use_lstm and self.use_gru:
            raise ConfigError(f"{label}: use_lstm and use_gru are both true; pick one cell")

    def _check_custom(self, label: str) -> None:
        """``custom_model``, if set, imports and is a ``torch.nn.Module`` with a ``value`` (or
        ``initial_state``) method, without a built-in cell; ``custom_model_config`` is a dict,
        not empty only with ``custom_model`` (None, as a YAML file may write it: empty)."""
        if self.custom_model_config is None:
            object.__setattr__(self, "custom_model_config", {})
        options = self.custom_model_config
        if not isinstance(options, dict):
            raise ConfigError(
                f"{label}.custom_model_config={options!r} must be a dict of the custom model's "
                "options"
            )
        if options and self.custom_model is None:
            raise ConfigError(
                f"{label}.custom_model_config is given without model.custom_model; name the "
                "model class it configures"
            )
        if self.custom_model is None:
            return
        if self.use_lstm or self.use_gru:
            raise ConfigError(
                f"{label}: use_lstm/use_gru wrap the built-in network, not model.custom_model; a "
                "custom model with memory gives initial_state(batch_size) and forward(obs, state, "
                "prev_actions, prev_rewards) itself (rlflow.models.recurrent)"
            )
        custom_model_class(self.custom_model, f"{label}.custom_model")

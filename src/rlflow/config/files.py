"""Config files and the shipped tuned configs: one loader and one coercion rule for both.

A config file is YAML: either a mapping of config fields, or a mapping with ``config:`` (the
fields), ``stop:`` (result key -> threshold) and optionally ``env:`` (also ``algorithm:`` and
``run:``, which are ignored). The tuned config of algorithm ALGO on env ENV ships as
``rlflow/algorithms/ALGO/tuned/ENV.yaml``, with each "/" of a namespaced id written "-"
(``ALE/Pong-v5`` -> ``ALE-Pong-v5.yaml``). Those files are sized for a small CPU machine; a
config sized for other hardware (`TUNED_HARDWARE`: ``"gpu"``, a GPU learner and many cores)
ships in a folder of that name, ``tuned/gpu/ENV.yaml``, and is chosen with ``hardware="gpu"``
(``rlflow train ALGO --env ENV --tuned-for gpu``).

The command line (``rlflow train``) and `rlflow.algorithms.tuned_config` both read files with
`load_config_file` and build the config with `build_config`, so one file gives one config
whichever way it is loaded. The one coercion rule (`coerce_field`, also applied to ``--set``
values by `parse_value`) fits YAML's values to the field types: a field that admits a float
takes ints as floats and numeric strings such as ``1e-3`` (a string in YAML 1.1, which PyYAML
reads) as floats; a field that holds a config or a field group whole (``ppo_dqn``'s ``ppo``
and ``dqn``, every config's ``model`` and ``self_play``) takes a mapping of its fields, each
fitted by the same rule; every other value is left as it is and checked by the config class.

>>> from rlflow.algorithms import DQNConfig, PPODQNConfig
>>> coerce_field(DQNConfig, "training_intensity", 16), coerce_field(DQNConfig, "lr", "1e-3")
(16.0, 0.001)
>>> coerce_field(DQNConfig, "n_step", 3)
3
>>> coerce_field(PPODQNConfig, "dqn", {"lr": "1e-3", "n_step": 3})
{'lr': 0.001, 'n_step': 3}
"""

from __future__ import annotations

import contextlib
import re
import types
import typing
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from rlflow.config.algorithm import AlgorithmConfig
from rlflow.config.group import FieldGroup
from rlflow.errors import ConfigError

__all__ = [
    "STOP_ALIASES",
    "TUNED_HARDWARE",
    "ConfigFile",
    "build_config",
    "coerce_field",
    "load_config_file",
    "load_tuned_config",
    "parse_value",
    "tuned_config_path",
    "tuned_env_id",
    "tuned_envs",
]

C = TypeVar("C", bound="AlgorithmConfig")

STOP_ALIASES = {
    "episode_reward_mean": "episode_return_mean",
    "timesteps_total": "num_env_steps_sampled",
    "training_iteration": "iteration",
}
"""RLlib/Tune stop keys accepted in config files, and the result keys they mean."""

_FILE_KEYS = ("config", "stop", "env", "algorithm", "run")

TUNED_HARDWARE = ("cpu", "gpu")
"""What a shipped tuned config is sized for: ``"cpu"`` (``tuned/ENV.yaml``: a 2-core CPU
machine, the default) or ``"gpu"`` (``tuned/gpu/ENV.yaml``: ``num_gpus: 1`` and a 16-core
machine's workers)."""


class ConfigFile(NamedTuple):
    """What a YAML config file holds."""

    fields: dict[str, Any]
    """Config fields (validated later against the algorithm's config class)."""
    stop: dict[str, float]
    """Stop criteria: result key -> threshold (stop when ``result[key] >= threshold``)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def load_config_file(path: str | Path) -> ConfigFile:
    """Read a YAML config file (see the module docstring); :class:`ConfigError` if malformed."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read config file {str(path)!r}: {err}") from None
    if data is None:
        return ConfigFile({}, {})
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping, not a list or scalar")
    if "config" not in data:
        return ConfigFile(dict(data), {})
    unknown = sorted(set(data) - set(_FILE_KEYS))
    if unknown or not isinstance(data["config"], dict):
        raise ConfigError(
            f"config file {str(path)!r}: with a 'config:' section the top-level keys must be "
            f"among {list(_FILE_KEYS)} and 'config' a mapping (got keys {sorted(data)})"
        )
    fields = dict(data["config"])
    if "env" in data:
        fields.setdefault("env", data["env"])
    stop = data.get("stop") or {}
    if not isinstance(stop, dict) or not all(_is_number(v) for v in stop.values()):
        raise ConfigError(f"config file {str(path)!r}: 'stop' must map result keys to numbers")
    return ConfigFile(fields, {STOP_ALIASES.get(str(k), str(k)): float(v) for k, v in stop.items()})


def _tuned_dir(algo: str, hardware: str) -> Any:
    if hardware not in TUNED_HARDWARE:
        raise ConfigError(
            f"tuned config hardware={hardware!r} must be one of {list(TUNED_HARDWARE)} "
            "(cpu: the default files, gpu: sized for a GPU learner)"
        )
    folder = resources.files("rlflow").joinpath("algorithms", algo, "tuned")
    return folder if hardware == "cpu" else folder.joinpath(hardware)


_NAMESPACED_FILE = re.compile(r"([A-Za-z][\w.]*)-([\w.]+-v\d+)")


def tuned_env_id(file_stem: str) -> str:
    """The env id a tuned config file is named for: a namespaced id's "/" is written "-" in
    the file name, so ``NAMESPACE-Name-vN`` is read back as ``NAMESPACE/Name-vN``.

    >>> [tuned_env_id(s) for s in ("CartPole-v1", "ALE-Pong-v5", "pettingzoo.classic.rps_v2")]
    ['CartPole-v1', 'ALE/Pong-v5', 'pettingzoo.classic.rps_v2']
    """
    named = _NAMESPACED_FILE.fullmatch(file_stem)
    return f"{named.group(1)}/{named.group(2)}" if named else file_stem


def tuned_envs(algo: str, hardware: str = "cpu") -> list[str]:
    """Env ids for which a tuned config of ``algo`` sized for ``hardware`` (`TUNED_HARDWARE`)
    ships, sorted by file name (`tuned_env_id`)."""
    folder = _tuned_dir(algo, hardware)
    if not folder.is_dir():
        return []
    stems = sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))
    return [tuned_env_id(stem) for stem in stems]


def tuned_config_path(algo: str, env: str, hardware: str = "cpu") -> Path | None:
    """The shipped tuned config file of ``algo`` on ``env`` sized for ``hardware``
    (`TUNED_HARDWARE`: ``tuned/ENV.yaml`` or ``tuned/gpu/ENV.yaml``), or None if none ships.

    A namespaced id has its "/" written "-" in the file name (``ALE/Pong-v5`` ->
    ``ALE-Pong-v5.yaml``).
    """
    folder = _tuned_dir(algo, hardware)
    if not re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", env):
        return None  # "module:Id" ids have no tuned file name
    path = folder.joinpath(f"{env.replace('/', '-')}.yaml")
    return Path(str(path)) if path.is_file() else None


def coerce_field(config_cls: type[FieldGroup], key: str, value: Any) -> Any:
    """``value`` fitted to the type of field ``key`` of ``config_cls`` (the one rule, above).

    Unknown keys pass through unchanged: `AlgorithmConfig.from_dict` rejects them with the
    closest valid name.
    """
    if key not in config_cls.field_names() or isinstance(value, bool):
        return value
    group = config_cls.held_group(key)
    if group is not None and isinstance(value, Mapping):
        return {k: coerce_field(group, k, v) for k, v in value.items()}
    hint = config_cls.field_type(key)
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if float not in allowed:
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, str):
        # A string that is no number stays one, so the config names it in its error.
        with contextlib.suppress(ValueError):
            return float(value)
    return value


def parse_value(config_cls: type[AlgorithmConfig], key: str, text: str) -> Any:
    """Parse ``text`` (YAML syntax: ``3``, ``1e-3``, ``true``, ``null``, ``[64, 64]``,
    ``{hidden: [32]}``) as the value of field ``key`` (a ``--set key=value``), by `coerce_field`.

    ConfigError for an unknown key (naming the closest field) or text that is not YAML.
    """
    import yaml

    config_cls.check_keys([key])
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"--set {key}={text!r}: not a valid value ({err})") from None
    return coerce_field(config_cls, key, value)


def build_config(config_cls: type[C], fields: Mapping[str, Any]) -> C:
    """``config_cls`` built from ``fields`` (each through `coerce_field`), validated."""
    return config_cls.from_dict({k: coerce_field(config_cls, k, v) for k, v in fields.items()})


def load_tuned_config(
    algo: str,
    config_cls: type[C],
    env_id: str,
    overrides: Mapping[str, Any],
    hardware: str = "cpu",
) -> C:
    """The shipped tuned config of ``algo`` (a registry name) for ``env_id`` sized for
    ``hardware`` (`TUNED_HARDWARE`), with ``overrides``.

    ``env`` defaults to ``env_id``. ConfigError naming the available envs if no file ships. A
    ``"gpu"`` config builds on a machine without a GPU; the `rlflow.Trainer` refuses it when
    it builds the learner (`check_learner_gpu`).
    """
    path = tuned_config_path(algo, env_id, hardware)
    if path is None:
        available = tuned_envs(algo, hardware)
        raise ConfigError(
            f"no tuned {algo} config for env {env_id!r} (hardware {hardware!r}); "
            f"available: {available}"
        )
    fields = load_config_file(path).fields
    fields.setdefault("env", env_id)
    return build_config(config_cls, {**fields, **overrides})

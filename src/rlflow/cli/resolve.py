"""What a ``train`` or ``plan`` command runs: the layered config and the stop criteria.

Layers, later wins: the algorithm's defaults, the tuned config shipped for ALGO+ENV
(``--tuned``; ``--tuned-for gpu`` picks the one sized for a GPU learner), ``--config
FILE.yaml``, the flags (``--env``, ``--num-workers``, ``--seed``), then ``--set key=value``
(``--set model.hidden=[32,32]``: one field of the model, or one key of a dict field). Files
and ``--set`` values go through `rlflow.config.files`'s one loader and coercion rule, so
``rlflow train ALGO --env ENV`` builds the config that ``rlflow.algorithms.tuned_config(ALGO,
ENV)`` returns.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from rlflow.config import AlgorithmConfig
from rlflow.config.files import (
    ConfigFile,
    build_config,
    coerce_field,
    load_config_file,
    parse_value,
    tuned_config_path,
    tuned_envs,
)
from rlflow.errors import ConfigError

if TYPE_CHECKING:  # the trainer imports torch: loaded when a command runs
    from rlflow.setup import TrainerSetup

__all__ = ["RunSpec", "is_number", "parse_sets", "resolve_run", "should_stop", "stop_criteria"]

logger = logging.getLogger(__name__)


class RunSpec(NamedTuple):
    """An algorithm with its validated config (resolved once, for the Trainer) and stop
    criteria."""

    setup: TrainerSetup
    """The algorithm and its config, env names checked: what `rlflow.Trainer` is given."""
    stop: dict[str, float]
    """Stop criteria from the config files: result key -> threshold."""

    @property
    def algo(self) -> str:
        """Registry name of the algorithm."""
        return str(self.setup.algorithm.name)

    @property
    def config(self) -> Any:
        """The validated `rlflow.config.AlgorithmConfig`."""
        return self.setup.config


def is_number(value: Any) -> bool:
    """True for an int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _default(config_cls: type[AlgorithmConfig], name: str) -> Any:
    """The default of field ``name`` of a config class, as a file would write it: for a field
    that holds a config or a group whole (``ppo_dqn``'s ``ppo``, ``model``, ``self_play``),
    ``{}``, no overrides of its default."""
    if config_cls.held_group(name) is not None:
        return {}
    return config_cls.field_default(name)


def resolve_run(args: argparse.Namespace) -> RunSpec:
    """Algorithm, layered config and stop criteria; raises ConfigError on any bad input."""
    from rlflow.algorithms import get_algorithm
    from rlflow.setup import resolve_setup

    spec = get_algorithm(args.algo)
    config_cls = spec.config_cls
    file = load_config_file(args.config) if args.config else ConfigFile({}, {})
    env = args.env or file.fields.get("env") or _default(config_cls, "env")
    fields: dict[str, Any] = {}
    stop: dict[str, float] = {}
    if args.tuned and isinstance(env, str):
        path = _tuned_path(spec.name, env, getattr(args, "tuned_for", "cpu"))
        if path is not None:
            tuned = load_config_file(path)
            logger.info("applying tuned config %s", path)
            fields.update(tuned.fields)
            stop.update(tuned.stop)
    fields.update(file.fields)
    stop.update(file.stop)
    flags = {"env": args.env, "num_workers": args.num_workers, "seed": args.seed}
    flags["loggers"] = getattr(args, "logger", None)
    flags["output"] = getattr(args, "output", None)
    fields.update({k: v for k, v in flags.items() if v is not None})
    fields.update(parse_sets(config_cls, args.set, base=fields))
    return RunSpec(resolve_setup(spec, build_config(config_cls, fields)), stop)


def _tuned_path(algo: str, env: str, hardware: str) -> Any:
    """The tuned file for ``hardware`` (None if no cpu one ships: the defaults apply); one
    asked for with ``--tuned-for gpu`` must exist."""
    path = tuned_config_path(algo, env, hardware)
    if path is None and hardware != "cpu":
        available = tuned_envs(algo, hardware)
        raise ConfigError(
            f"--tuned-for {hardware}: no {hardware} tuned {algo} config for env {env!r}; "
            f"available: {available}"
        )
    return path


def parse_sets(
    config_cls: Any, items: Sequence[str], base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as config fields (values parsed for ``config_cls``).

    A dotted key sets one key inside a dict field (``env_config.size=4``; more dots reach
    nested dicts): the field's value in ``base`` (the config built so far), else its default,
    with that one key replaced, so the rest is kept. A field that holds a config or a group
    whole (``model.use_lstm=true``, ``self_play.snapshot_every=10``, ``ppo_dqn``'s
    ``ppo.lr=0.001``, ``ppo.model.hidden=[16]``) is a dict of overrides of its default here, as
    in a file: the dotted key sets one of its fields (checked against that class, the value
    fitted to its type by `rlflow.config.files.coerce_field`). ConfigError naming the key for
    an unknown field (with the closest name) or one that is not a dict.
    """
    values: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set lr=0.001")
        name, dot, rest = key.partition(".")
        value = parse_value(config_cls, name, text)  # checks the field name
        if not dot:
            values[name] = value
            continue
        parts, label = rest.split("."), f"--set {key}"
        group = config_cls.held_group(name)
        if group is not None and parts[0]:
            try:
                group.check_keys(parts[:1])
            except ConfigError as err:
                raise ConfigError(f"{label}: {err}") from None
        current = values.get(name, (base or {}).get(name, _default(config_cls, name)))
        values[name] = coerce_field(config_cls, name, _with_key(current, parts, value, label))
    return values


def _with_key(mapping: Any, parts: list[str], value: Any, label: str) -> dict[str, Any]:
    """A copy of the dict ``mapping`` with the nested key ``parts`` set to ``value``."""
    if not isinstance(mapping, Mapping):
        raise ConfigError(
            f"{label}: a dotted key sets one key of a dict field, but the value it reaches is "
            f"{mapping!r}; set the field whole (without the dot)"
        )
    if not all(parts):
        raise ConfigError(f"{label}: empty key between dots")
    out = dict(mapping)
    head = parts[0]
    out[head] = value if len(parts) == 1 else _with_key(out.get(head, {}), parts[1:], value, label)
    return out


def stop_criteria(args: argparse.Namespace, base: Mapping[str, float]) -> dict[str, float]:
    """``base`` (from the config files) updated by the ``--stop-*`` flags; ConfigError if bad."""
    stop = dict(base)
    flags = {
        "episode_return_mean": args.stop_reward,
        "policy_reward_mean": args.stop_policy_reward,
        "win_rate": args.stop_win_rate,
        "num_env_steps_sampled": args.stop_timesteps,
        "time_total_s": args.stop_time,
        "iteration": args.stop_iters,
    }
    for key, value in flags.items():
        if value is not None:
            if key == "win_rate" and not 0 < value <= 1:
                raise ConfigError(f"--stop-win-rate {value!r}: must be a rate in (0, 1]")
            if key not in ("episode_return_mean", "policy_reward_mean", "win_rate") and value <= 0:
                raise ConfigError(f"--stop-{key}: {value!r} must be > 0")
            stop[key] = float(value)
    return stop


def should_stop(result: Mapping[str, Any], stop: Mapping[str, float]) -> str | None:
    """Why to stop after ``result`` (``"key=value >= threshold"``), or None to go on.

    A per-policy value (a mapping) counts as reached when every policy reaches it. A run
    that samples no episodes (the offline algorithms: bc, marwil) stops on its evaluation's
    ``evaluation/episode_return_mean`` for ``episode_return_mean``; one that samples no env
    steps at all (reading recorded experience only) on its rows trained,
    ``num_env_steps_trained``, for ``num_env_steps_sampled`` (``--stop-timesteps``).
    """
    for key, threshold in stop.items():
        value: Any = result.get(key)
        if key == "episode_return_mean" and not is_number(value):
            key = "evaluation/episode_return_mean"
            value = result.get(key)
        if key == "num_env_steps_sampled" and value == 0:
            key = "num_env_steps_trained"
            value = result.get(key)
        if isinstance(value, Mapping):
            value = min(value.values()) if value else None
        if is_number(value) and not math.isnan(value) and value >= threshold:
            return f"{key}={value:g} >= {threshold:g}"
    return None


def served_spaces(spaces_file: str | None, config: Any) -> tuple[Any, Any]:
    """``serve``'s observation and action spaces: ``spaces_file``'s (JSON ``{"observation_space":
    SPACE, "action_space": SPACE}``, spaces as `rlflow.export.spaces` writes them), else those
    of one env of ``config`` (built, never stepped, closed); ConfigError if unusable."""
    if spaces_file is None:
        from rlflow.envs.creator import config_env_creator

        env = config_env_creator(config)()
        try:
            if not hasattr(env, "action_space") or hasattr(env, "possible_agents"):
                raise ConfigError(
                    f"serve: env {config.env!r} is multi-agent; serving takes one observation "
                    "and action space (--env a single-agent env, or --spaces FILE.json)"
                )
            return env.observation_space, env.action_space
        finally:
            env.close()
    import json

    from rlflow.export.spaces import space_from_json

    try:
        with open(spaces_file) as f:
            spec = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"--spaces {spaces_file!r}: cannot read it as JSON ({err})") from None
    keys = spec if isinstance(spec, dict) else {}  # a list or number in the file: none
    missing = [k for k in ("observation_space", "action_space") if k not in keys]
    if missing:
        raise ConfigError(
            f"--spaces {spaces_file!r}: expected an object with observation_space and "
            f"action_space (missing: {missing})"
        )
    try:
        return space_from_json(spec["observation_space"]), space_from_json(spec["action_space"])
    except (ConfigError, KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"--spaces {spaces_file!r}: {err}") from None

"""`EnvRunConfig`: Gymnasium wrappers named in a config (``env_wrappers``), the observation
filter (``observation_filter``) and periodic evaluation during training
(``evaluation_interval``, ``evaluation_num_episodes``).

`rlflow.config.AlgorithmConfig` extends it. The wrappers are applied by the env creator that
`rlflow.envs.config_env_creator` builds from a config; the evaluation runs in
`rlflow.Trainer.train`.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rlflow.checks import check_int, check_type
from rlflow.config.reporting import LoggingConfig
from rlflow.errors import ConfigError

__all__ = [
    "OBSERVATION_FILTERS",
    "EnvRunConfig",
    "WrapperSpec",
    "resolve_wrapper",
    "wrapper_specs",
]

OBSERVATION_FILTERS = ("NoFilter", "MeanStdFilter")
"""The values of ``observation_filter`` (RLlib's names); see `rlflow.filters`."""


class WrapperSpec(NamedTuple):
    """One entry of ``env_wrappers``: a wrapper's dotted import path and its keyword args."""

    name: str
    """``"package.module.Class"``, e.g. ``"gymnasium.wrappers.TimeLimit"``."""
    kwargs: dict[str, Any]
    """Keyword arguments after the env: ``Class(env, **kwargs)``."""


def resolve_wrapper(name: str, label: str) -> Any:
    """The wrapper class (or function) at the dotted path ``name``; `ConfigError` naming
    ``label`` and ``name`` (with the closest names in its module) if it cannot be imported."""
    module_name, _, attr = name.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"{label}={name!r}: must be a dotted path 'package.module.Wrapper'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"{label}={name!r}: cannot import {module_name!r} ({err})") from None
    wrapper = getattr(module, attr, None)
    if wrapper is None or not callable(wrapper):
        close = difflib.get_close_matches(attr, [n for n in dir(module) if n[:1].isupper()], n=3)
        hint = (
            f"; did you mean {' or '.join(f'{module_name}.{c}' for c in close)}?" if close else ""
        )
        raise ConfigError(f"{label}={name!r}: unknown wrapper, {module_name} has no {attr!r}{hint}")
    return wrapper


def wrapper_specs(items: Any, label: str) -> list[WrapperSpec]:
    """``env_wrappers`` items (``"pkg.Wrapper"`` or ``{name: ..., kwargs: {...}}``) as
    `WrapperSpec` records, each name checked by `resolve_wrapper`; `ConfigError` naming
    ``label`` and the item otherwise."""
    if not isinstance(items, list | tuple):
        raise ConfigError(f"{label}={items!r} must be a list of wrapper names or dicts")
    specs = []
    for k, item in enumerate(items):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping) or not set(item) <= {"name", "kwargs"}:
            raise ConfigError(
                f"{label}[{k}]={item!r} must be 'package.module.Wrapper' or a dict with keys "
                "'name' and (optionally) 'kwargs'"
            )
        name, kwargs = item.get("name"), item.get("kwargs", {})
        if not isinstance(name, str) or not isinstance(kwargs, Mapping):
            raise ConfigError(f"{label}[{k}]={item!r}: name must be a string, kwargs a dict")
        resolve_wrapper(name, f"{label}[{k}]")
        specs.append(WrapperSpec(name, dict(kwargs)))
    return specs


VECTOR_ENVS = ("auto", "rlflow", "gymnasium", "gymnasium-sync", "gymnasium-async", "envpool")
"""The values of ``vector_env``, the env engine of a rollout worker (`rlflow.envs.gym_vector`)."""


@dataclass(frozen=True, kw_only=True)
class EnvRunConfig(LoggingConfig):
    """Env wrappers and periodic evaluation (the logging, resource and failure fields come
    from its bases)."""

    env_wrappers: list[Any] = field(default_factory=list)
    """Gymnasium wrappers around each env, applied in order (the first wraps the raw env):
    each a dotted path (``"gymnasium.wrappers.ClipAction"``) or a dict ``{"name": path,
    "kwargs": {...}}`` (``Wrapper(env, **kwargs)``). An unknown name is a `ConfigError` naming
    it. Single-agent Gymnasium envs only. Empty: none."""
    observation_filter: str = "NoFilter"
    """``"NoFilter"`` or ``"MeanStdFilter"`` (RLlib's names). ``"MeanStdFilter"``: each rollout
    worker normalizes every observation element by a running mean and std, ``(x - mean) / (std
    + 1e-8)`` clipped to [-10, 10], before the policy sees it (sample batches hold the filtered
    observations); one filter per policy. Once per training iteration the learner merges the
    workers' new statistics and sends the merged filter back (`rlflow.filters`,
    `rlflow.ops.filters`). Evaluation, `rlflow.Trainer.compute_actions` and exported policies
    apply the learner's filter frozen; checkpoints hold it. Box observations only, not images
    (`ConfigError` otherwise)."""
    evaluation_interval: int = 0
    """Evaluate every this many training iterations, >= 0 (0: never): greedy episodes on a
    fresh env of the learner (`rlflow.Trainer.evaluate`), reported in that iteration's result
    under ``evaluation/`` keys (``evaluation/episode_return_mean``, ...)."""
    evaluation_num_episodes: int = 10
    """Episodes per periodic evaluation, >= 1."""
    vector_env: str = "auto"
    """The env engine of each rollout worker (`rlflow.envs.gym_vector`): ``"rlflow"`` (N envs
    stepped in one in-process loop), ``"gymnasium-sync"`` / ``"gymnasium-async"``
    (``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv``, the same trajectories),
    ``"gymnasium"`` (``gymnasium.make_vec`` with the env's vectorized entry point where it
    registers one, such as CartPole-v1's numpy ``CartPoleVectorEnv``, else sync),
    ``"envpool"`` (if installed) or ``"auto"``: the fastest engine measured for the env's family,
    ``"rlflow"`` so far. Only ``"rlflow"`` restarts failed sub-envs and steps multi-agent envs
    (another explicit value is a `ConfigError` then; ``"auto"`` picks ``"rlflow"``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        name = type(self).__name__
        wrapper_specs(self.env_wrappers, f"{name}.env_wrappers")
        label = f"{name}.observation_filter"
        check_type(self.observation_filter, label, str, "'NoFilter' or 'MeanStdFilter'")
        if self.observation_filter not in OBSERVATION_FILTERS:
            close = difflib.get_close_matches(self.observation_filter, OBSERVATION_FILTERS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{label}={self.observation_filter!r}: must be one of "
                f"{', '.join(repr(f) for f in OBSERVATION_FILTERS)}{hint}"
            )
        check_int(self.evaluation_interval, f"{name}.evaluation_interval", low=0)
        check_int(self.evaluation_num_episodes, f"{name}.evaluation_num_episodes", low=1)
        if self.vector_env not in VECTOR_ENVS:
            raise ConfigError(
                f"{name}.vector_env={self.vector_env!r}: must be one of "
                f"{', '.join(repr(v) for v in VECTOR_ENVS)}"
            )

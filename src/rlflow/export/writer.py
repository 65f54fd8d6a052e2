"""`export_policy`: write one trained policy as a directory that `load_policy` rebuilds.

What is written (``policy.json``, strict JSON): the algorithm and the policy's class, the
actor's class and options (`rlflow.models.actors`), the observation and action spaces
(`rlflow.export.spaces`), the policy id, and the env with its preprocessing: an env's wrappers
(Atari's frame stacking among them) are not part of the model, so the spec records the env id,
its ``env_config`` and whether rlflow wraps it (``ALE/...`` ids get the DeepMind wrappers of
`rlflow.envs.atari.make_atari`); observations given to a loaded policy must come from an env
built the same way. The weights go to ``weights.pt`` (`rlflow.export.files`).

With ``observation_filter="MeanStdFilter"`` the spec also holds the learner's filter
(``observation_filter``: mean, std, clip and epsilon, `rlflow.filters.filter_to_json`), which
the loaded policy applies, frozen, to the raw observations it is given; without one it says
``{"name": "NoFilter"}``.

When the env's observations are structured (a ``Dict``, ``Tuple``, ``MultiDiscrete`` or
``MultiBinary`` space, PettingZoo's ``{"observation", "action_mask"}`` among them), the env
creator flattens them before the policy sees them (`rlflow.envs.flatten`); the spec then also
holds the env's own space (``env_observation_space``), from which the loaded policy flattens
the observations it is given the same way (`rlflow.export.observations`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from rlflow.errors import ConfigError
from rlflow.export.files import write_export
from rlflow.export.spaces import space_to_json
from rlflow.filters import MeanStdFilter, filter_to_json
from rlflow.models.actors import ActorCriticActor, ActorExport, class_path
from rlflow.models.nets import ActorCritic
from rlflow.version import __version__

__all__ = ["actor_export", "env_record", "export_policy"]


def actor_export(policy: Any) -> ActorExport:
    """What ``policy`` exports: its own ``export_model()`` if its class has one, else its
    ``model`` when that is an `ActorCritic` (every `TorchPolicy` built by the base);
    `ConfigError` for any other model."""
    hook = getattr(policy, "export_model", None)
    if callable(hook):
        export: ActorExport = hook()
        return export
    model = getattr(policy, "model", None)
    if type(model) is ActorCritic:
        return ActorCriticActor.export_of(model, policy.observation_space, policy.action_space)
    raise ConfigError(
        f"{type(policy).__name__} cannot be exported: its model is a {type(model).__name__}, not "
        "an ActorCritic; give the policy class an export_model() returning an ActorExport"
    )


def _jsonable(value: Any) -> Any:
    """``value`` if it is JSON, else its ``repr`` (a callable in ``env_config``)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def env_record(config: Any) -> dict[str, Any]:
    """The env of ``config`` as an export records it (id, ``env_config``, wrappers)."""
    env = config.env
    env_id = env if isinstance(env, str) else None
    atari = env_id is not None and env_id.startswith("ALE/")
    deepmind = atari and bool(config.env_config.get("deepmind", True))
    return {
        "id": env_id,
        "creator": None if env_id else str(getattr(env, "__qualname__", repr(env))),
        "env_config": _jsonable(dict(config.env_config)),
        "env_wrappers": _jsonable(list(getattr(config, "env_wrappers", None) or [])),
        "preprocessing": "rlflow.envs.atari.make_atari (DeepMind wrappers)" if deepmind else None,
    }


def _check_rebuilds(export: ActorExport, policy: Any) -> None:
    """Build the actor from its options and load the weights, as a loader will (torch's
    global RNG left as it was); `ConfigError` if they do not fit."""
    with torch.random.fork_rng(devices=[]):
        actor = export.actor_class(policy.observation_space, policy.action_space, **export.options)
    state = {k: torch.as_tensor(v) for k, v in export.weights.items()}
    try:
        actor.load_state_dict(state)
    except RuntimeError as err:
        raise ConfigError(
            f"{type(policy).__name__}.export_model: the weights do not fit "
            f"{export.actor_class.__name__} built from its options ({err})"
        ) from err


def export_policy(
    policy: Any,
    path: str | Path,
    *,
    algorithm: str,
    policy_id: str,
    config: Any,
    obs_filter: MeanStdFilter | None = None,
    env_observation_space: Any = None,
) -> str:
    """Write ``policy`` (of ``algorithm``, named ``policy_id`` in a run with ``config``) as the
    directory ``path`` (see the module docstring); return its path. ``obs_filter``: the
    policy's observation filter (the learner's), saved with its current statistics.
    ``env_observation_space``: the space of the env's own observations when the env creator
    flattened them into the policy's (`rlflow.workers.RolloutWorker.env_observation_spaces`),
    recorded so that the loaded policy takes them as they are. An export already there is
    replaced once the new one is complete."""
    export = actor_export(policy)
    try:
        options = json.loads(json.dumps(export.options, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"export_model options {export.options!r} are not JSON: {err}") from err
    _check_rebuilds(export, policy)
    spec = {
        "rlflow_version": __version__,
        "algorithm": algorithm,
        "policy_id": policy_id,
        "policy_class": class_path(type(policy)),
        "actor_class": class_path(export.actor_class),
        "actor_options": options,
        "observation_space": space_to_json(policy.observation_space),
        "action_space": space_to_json(policy.action_space),
        "env": env_record(config),
        "observation_filter": filter_to_json(obs_filter),
    }
    if env_observation_space is not None:
        spec["env_observation_space"] = space_to_json(env_observation_space)
    return write_export(path, spec, export.weights)

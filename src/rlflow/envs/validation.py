"""Checks of what an env gives back, and the names and seeds of sub-env restarts.

An env's observations are checked against its observation space on the first steps after the
env is built or rebuilt (`OBS_CHECK_STEPS`), never on every step: the samplers call
`check_observation` only while their check window is open, so a wrong shape, dtype or bound
is a `ConfigError` naming the env and what was expected, instead of a numpy broadcast error
deep inside a rollout buffer.

Whether an env follows the Gymnasium API at all is checked once too: its spaces and ``reset``
signature on the probe env, before any actor starts (`check_env_api`), what ``reset`` and
``step`` return on the first calls (`check_returned`), so an old Gym env is a `ConfigError`
naming the env, the call and what it returned, instead of a raw unpacking ``ValueError``.
"""

from __future__ import annotations

import functools
import inspect
import logging
from typing import Any

import numpy as np
from gymnasium import spaces

from rlflow.envs.flatten import ACTION_MASK, action_mask_size
from rlflow.errors import ConfigError

logger = logging.getLogger(__name__)

__all__ = [
    "GYMNASIUM_API",
    "MAX_RESTART_ATTEMPTS",
    "OBS_CHECK_STEPS",
    "check_calls",
    "check_env_api",
    "check_observation",
    "check_returned",
    "check_spaces",
    "close_quietly",
    "env_failure_note",
    "env_location",
    "env_name",
    "restart_seed",
]

OBS_CHECK_STEPS = 3
"""Steps after an env is (re)built whose observations (and those of resets in them) are checked."""
MAX_RESTART_ATTEMPTS = 10
"""Rebuilds of one env in a row (each one's reset raised too) before the error is given up on."""


GYMNASIUM_API = (
    "a Gymnasium env's observation_space and action_space are gymnasium.spaces, its "
    "reset(*, seed=None, options=None) returns (obs, info) and step(action) returns "
    "(obs, reward, terminated, truncated, info), info a dict; check an env with "
    "gymnasium.utils.env_checker.check_env(env), and wrap an old Gym env with shimmy "
    "(shimmy.GymV21CompatibilityV0 or shimmy.GymV26CompatibilityV0)"
)
"""How to fix an env that does not follow the Gymnasium API; ends every such message."""

_RETURN_SHAPES = {"reset": "(obs, info)", "step": "(obs, reward, terminated, truncated, info)"}


def check_env_api(env: Any, name: str) -> None:
    """Raise `ConfigError` unless the single-agent env ``env`` (named ``name`` in the message)
    has ``observation_space`` and ``action_space`` that are `gymnasium.spaces.Space`, and a
    ``reset`` that takes ``seed``: what shows without calling the env (`check_returned` checks
    what it returns). Cheap: for the probe env, before any actor starts.

    >>> class Old:
    ...     observation_space = spaces.Discrete(2)
    >>> check_env_api(Old(), "Old")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlflow.errors.ConfigError: env 'Old' has no action_space; a Gymnasium env's ...
    """
    for attr in ("observation_space", "action_space"):
        space = getattr(env, attr, None)
        if space is None:
            raise ConfigError(f"env {name!r} has no {attr}; {GYMNASIUM_API}")
        if not isinstance(space, spaces.Space):
            kind = f"{type(space).__module__}.{type(space).__qualname__}"
            raise ConfigError(
                f"env {name!r}: {attr} is a {kind}, not a gymnasium.spaces.Space; {GYMNASIUM_API}"
            )
    try:
        params = inspect.signature(env.reset).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin): its first call shows
        return
    takes_seed = "seed" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    if not takes_seed:
        raise ConfigError(
            f"env {name!r}: reset({', '.join(map(str, params.values()))}) takes no seed "
            f"argument; {GYMNASIUM_API}"
        )


def check_returned(result: Any, method: str, *, where: str) -> None:
    """Raise `ConfigError` unless ``result``, returned by ``method`` (``"reset"`` or
    ``"step"``), is the Gymnasium tuple: ``(obs, info)`` or ``(obs, reward, terminated,
    truncated, info)``, info a dict. ``where`` names the env, worker and sub-env. Cheap (a type
    and a length), for the first calls after an env is built (`OBS_CHECK_STEPS`).

    >>> check_returned((0, 1.0, False, {}), "step", where="env 'X', sub-env 0")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlflow.errors.ConfigError: env 'X', sub-env 0: step() returned 4 values, expected 5 values \
(obs, reward, terminated, truncated, info); a Gymnasium env's ...
    """
    shape = _RETURN_SHAPES[method]
    size = shape.count(",") + 1
    if not isinstance(result, tuple):
        what = f"a single {type(result).__name__}"
    elif len(result) != size:
        what = f"{len(result)} values"
    elif not isinstance(result[-1], dict):
        what = f"{size} values with an info of type {type(result[-1]).__name__}, not a dict"
    else:
        return
    raise ConfigError(
        f"{where}: {method}() returned {what}, expected {size} values {shape}; {GYMNASIUM_API}"
    )


def check_calls(env: Any, name: str) -> None:
    """Reset ``env`` and take one step with a sampled action, checking what both return
    (`check_returned`): for the learner's probe env, so an old Gym env is refused before any
    actor starts, whatever the engine (`rlflow.envs.vector.VectorEnv` checks its sub-envs'
    first calls too; the Gymnasium and EnvPool engines call the env themselves)."""
    where = f"env {name!r}"
    result = env.reset(seed=0)
    check_returned(result, "reset", where=where)
    check_returned(env.step(_legal_sample(env, result[0])), "step", where=where)


def _legal_sample(env: Any, obs: Any) -> Any:
    """A random action of ``env``, a legal one where its observation ``obs`` carries an action
    mask over ``Discrete`` actions (a Dict's ``action_mask``, or the last values of a
    flattened one: `rlflow.envs.flatten`)."""
    space = env.action_space
    if not isinstance(space, spaces.Discrete):
        return space.sample()
    mask = None
    if isinstance(obs, dict) and ACTION_MASK in obs:
        mask = np.asarray(obs[ACTION_MASK])
    elif action_mask_size(env.observation_space):
        mask = np.asarray(obs)[-action_mask_size(env.observation_space) :]
    if mask is None or mask.shape != (int(space.n),) or not mask.any():
        return space.sample()
    return space.sample(mask=(mask > 0.5).astype(np.int8))


def env_name(env: Any) -> str:
    """A short name of an env, env spec or creator for messages: the Gymnasium id (of the env,
    or the one a `make_env_creator` creator builds), else the creator's or class's name."""
    if isinstance(env, str):
        return env
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    args = getattr(env, "args", None)  # make_env_creator's functools.partial(make, env_id)
    if isinstance(args, tuple) and args and isinstance(args[0], str):
        return args[0]
    if isinstance(args, tuple) and args and isinstance(args[0], functools.partial):
        return env_name(args[0])  # config_env_creator's partials around it
    target = getattr(env, "func", env)
    name = getattr(target, "__name__", None) or type(target).__name__
    return str(name)


def env_location(env_id: str, worker_index: int | None, index: int, unit: str = "sub-env") -> str:
    """Which env in a message: its name, the rollout worker (if any) and its index.

    >>> env_location("CartPole-v1", 2, 0)
    "env 'CartPole-v1', rollout worker 2, sub-env 0"
    """
    worker = "" if worker_index is None else f", rollout worker {worker_index}"
    return f"env {env_id!r}{worker}, {unit} {index}"


def env_failure_note(env_id: str, worker_index: int | None, index: int, method: str) -> str:
    """The note an env error gets: which env, worker and sub-env raised, in which call."""
    return f"raised by {env_location(env_id, worker_index, index)}, in {method}()"


def restart_seed(seed: int | None, index: int, restarts: int) -> int | None:
    """The first-reset seed of sub-env ``index`` after its ``restarts``-th rebuild (>= 1).

    Derived from the sampler's ``seed`` (sub-env ``index`` first resets with ``seed + index``)
    and the restart count, so a run with restarts is still reproducible from its seed and a
    rebuilt env never replays the episode that failed; None when the envs are unseeded.

    >>> restart_seed(0, 1, 1) == restart_seed(0, 1, 1) != restart_seed(0, 1, 2)
    True
    """
    if seed is None:
        return None
    return int(np.random.SeedSequence([seed + index, restarts]).generate_state(1)[0])


def _problem(space: Any, ob: Any) -> str | None:
    """What is wrong with ``ob`` for ``space`` (None: nothing)."""
    if isinstance(space, spaces.Discrete):
        return None if space.contains(ob) else f"value {ob!r}"
    arr = np.asarray(ob)
    shape = getattr(space, "shape", None)
    if shape is not None and arr.shape != shape:
        return f"shape {arr.shape}"
    dtype = getattr(space, "dtype", None)
    if dtype is not None and not np.can_cast(arr.dtype, dtype, casting="same_kind"):
        return f"dtype {arr.dtype}"
    if isinstance(space, spaces.Box):
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            # NaN and infinities are the samplers' check (on_nonfinite), not a bounds mismatch.
            low, high = (
                np.broadcast_to(space.low, arr.shape),
                np.broadcast_to(space.high, arr.shape),
            )
            finite = np.isfinite(arr)
            arr, low, high = arr[finite], low[finite], high[finite]
        else:
            low, high = space.low, space.high
        if not (np.all(arr >= low) and np.all(arr <= high)):
            return f"values outside the bounds (min {arr.min()}, max {arr.max()})"
        return None
    if not space.contains(arr.astype(dtype, copy=False) if dtype is not None else arr):
        return f"value {arr.tolist()!r}"
    return None


def check_action_batch(space: Any, actions: Any, num_envs: int, *, owner: str) -> None:
    """Raise `ConfigError` unless ``actions`` has shape ``(num_envs, *space.shape)``: one
    action per sub-env of a vector env; ``owner`` names the caller (``"VectorEnv.step"``)."""
    expected = (num_envs, *space.shape)
    if actions.shape != expected:
        raise ConfigError(
            f"{owner}: actions have shape {actions.shape}, expected {expected} "
            f"for {num_envs} sub-envs with action space {space}"
        )


def check_observation(space: Any, ob: Any, *, where: str) -> None:
    """Raise `ConfigError` unless observation ``ob`` fits ``space``: shape, dtype (castable to
    the space's within its kind: float64 for float32 is fine, float for uint8 is not) and
    bounds (of the finite values: NaN and infinities are left to the samplers' non-finite check,
    `rlflow.envs.nonfinite`). ``where`` names the env, worker and call for the message.

    >>> check_observation(spaces.Box(0.0, 1.0, (2,)), np.zeros(3), where="env 'X' reset()")
    Traceback (most recent call last):
    ...
    rlflow.errors.ConfigError: env 'X' reset(): observation has shape (3,), expected shape (2,) \
of Box(0.0, 1.0, (2,), float32); fix the env or its observation_space
    """
    problem = _problem(space, ob)
    if problem is None:
        return
    shape = getattr(space, "shape", None)
    expected = f"shape {shape}" if problem.startswith("shape") else "a value"
    if problem.startswith("dtype"):
        expected = f"dtype {getattr(space, 'dtype', None)}"
    raise ConfigError(
        f"{where}: observation has {problem}, expected {expected} of {space}; fix the env or "
        "its observation_space"
    )


_STACKABLE = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def _check_space(name: str, space: Any) -> None:
    """Raise `ConfigError` unless ``space`` stacks into one numpy array."""
    if not isinstance(space, _STACKABLE):
        raise ConfigError(
            f"VectorEnv: {name} {space} is not supported; use Box, Discrete, MultiDiscrete or "
            "MultiBinary (the env creator of a config flattens Dict and Tuple observations: "
            "rlflow.envs.flatten)"
        )


def check_spaces(envs: Any) -> Any:
    """Check that the spaces of the sub-envs ``envs`` stack (`rlflow.envs.vector.VectorEnv`);
    return the observation dtype. `ConfigError` naming the space or sub-env otherwise."""
    first = envs[0].observation_space
    _check_space("observation space", first)
    _check_space("action space", envs[0].action_space)
    for i, env in enumerate(envs[1:], start=1):
        space = env.observation_space
        if (space.shape, space.dtype) != (first.shape, first.dtype):
            raise ConfigError(
                f"VectorEnv: sub-env {i} has observation space {space} but sub-env 0 has "
                f"{first}; shapes and dtypes must match to stack them"
            )
    return first.dtype


def close_quietly(env: Any) -> None:
    """Close a failed env that is being replaced; an error in its close is logged, not raised."""
    try:
        env.close()
    except Exception as err:  # noqa: BLE001 - a broken env may fail to close too
        logger.warning("closing a failed env raised %r", err)


def pickles_by_constructor(env: Any) -> bool:
    """Whether ``env`` (or an env it wraps, through ``.env`` attributes) pickles as its
    constructor arguments only (Gymnasium's ``EzPickle``: PettingZoo's classic games, Box2D and
    MuJoCo envs), so an unpickled copy is a fresh env that was never reset, not the episode in
    progress.

    >>> import gymnasium as gym
    >>> pickles_by_constructor(gym.make("CartPole-v1"))
    False
    """
    from gymnasium.utils import EzPickle

    seen: set[int] = set()
    while env is not None and id(env) not in seen:
        if isinstance(env, EzPickle):
            return True
        seen.add(id(env))
        env = getattr(env, "__dict__", {}).get("env")
    return False

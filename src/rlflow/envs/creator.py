"""Turn an env spec from a config (a Gymnasium id or a creator function) into a creator."""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from rlflow.errors import ConfigError

logger = logging.getLogger(__name__)

EnvCreator = Callable[[], gym.Env[Any, Any]]
"""A zero-argument callable that builds a fresh environment on each call."""


def _check_registered(env_id: str) -> None:
    """Raise `ConfigError` naming ``env_id`` and close registered ids if it is unknown."""
    module, sep, name = env_id.rpartition(":")
    if sep:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ConfigError(
                f"make_env_creator: env id {env_id!r} names module {module!r}, which could not be "
                f"imported ({err}); install it or fix the module part before ':'"
            ) from err
    if name in gym.registry:
        return
    close = difflib.get_close_matches(name, list(gym.registry), n=3, cutoff=0.6)
    hint = (
        f"did you mean {' or '.join(repr(c) for c in close)}?"
        if close
        else ("see gymnasium.pprint_registry() for the registered ids")
    )
    raise ConfigError(f"make_env_creator: unknown Gymnasium env id {env_id!r}; {hint}")


def make_env_creator(env: str | Callable[..., gym.Env[Any, Any]], **env_kwargs: Any) -> EnvCreator:
    """Return a zero-argument creator for ``env``, checking Gymnasium ids eagerly.

    ``env`` is either a registered Gymnasium id (``"CartPole-v1"``, or ``"module:Id-v0"`` to
    import the module that registers it) or a callable returning a `gymnasium.Env`.
    ``env_kwargs`` are passed to `gymnasium.make` or to the callable on every call. The creator
    is a `functools.partial`, so it pickles when ``env`` does (needed to ship it to actors).

    Raises `ConfigError` for an unknown id (naming the id and the closest registered ids) or
    for an ``env`` that is neither a string nor callable. No environment is built here.

    Example:
        >>> creator = make_env_creator("CartPole-v1", max_episode_steps=10)
        >>> creator().spec.max_episode_steps
        10
    """
    if isinstance(env, str):
        _check_registered(env)
        return functools.partial(gym.make, env, **env_kwargs)
    if isinstance(env, gym.Env):
        raise ConfigError(
            f"make_env_creator: got an env instance ({type(env).__name__}); pass a function "
            "that builds one (e.g. the class itself) so that each sub-env is a fresh instance"
        )
    if callable(env):
        return functools.partial(env, **env_kwargs) if env_kwargs else env
    raise ConfigError(
        f"make_env_creator: env={env!r} ({type(env).__name__}) must be a Gymnasium id string or "
        "a callable that returns a gymnasium.Env"
    )

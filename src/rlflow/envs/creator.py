"""Turn an env spec from a config (a Gymnasium id or a creator function) into a creator."""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
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
        _check_mujoco(name)
        return
    close = difflib.get_close_matches(name, list(gym.registry), n=3, cutoff=0.6)
    hint = (
        f"did you mean {' or '.join(repr(c) for c in close)}?"
        if close
        else ("see gymnasium.pprint_registry() for the registered ids")
    )
    raise ConfigError(f"make_env_creator: unknown Gymnasium env id {env_id!r}; {hint}")


def _check_mujoco(env_id: str) -> None:
    """Raise `ConfigError` naming the ``mujoco`` extra if ``env_id`` is one of Gymnasium's
    MuJoCo envs (``HalfCheetah-v5``, ...) and mujoco cannot be imported."""
    if not str(gym.registry[env_id].entry_point).startswith("gymnasium.envs.mujoco"):
        return
    try:
        import mujoco  # noqa: F401
    except ImportError as err:
        raise ConfigError(
            f"make_env_creator: env id {env_id!r} is a MuJoCo env and mujoco could not be "
            f'imported ({err}); install the mujoco extra: pip install "rl-flow[mujoco]"'
        ) from None


ALE_PREFIX = "ALE/"
"""Env ids starting with this are Atari games, built by `make_ale_env`."""


def make_ale_env(env_id: str, *, deepmind: bool = True, **env_kwargs: Any) -> gym.Env[Any, Any]:
    """Build the ALE game ``env_id``: DeepMind-wrapped by default, raw with ``deepmind=False``.

    With ``deepmind=True`` this is `rlflow.envs.atari.make_atari` (uint8 ``(84, 84, 4)``
    observations, clipped rewards, episodic lives, no sticky actions); ``env_kwargs`` go to it
    (``episodic_life``, ``clip_rewards``, ``frame_stack``, or ALE arguments such as
    ``repeat_action_probability``). With ``deepmind=False`` it is the plain
    ``gymnasium.make(env_id, **env_kwargs)`` (RGB frames, the v5 frame skip and sticky actions).
    """
    from rlflow.envs.atari import make_atari, register_ale_envs

    if deepmind:
        return make_atari(env_id, **env_kwargs)
    register_ale_envs()
    return gym.make(env_id, **env_kwargs)


PETTINGZOO_PREFIX = "pettingzoo."
"""Env ids starting with this are PettingZoo's own env modules (`make_pettingzoo_env`); a
failed import of one names the ``multiagent`` extra."""


def is_env_module_name(name: str) -> bool:
    """Whether ``name`` may name a Python module of a multi-agent env (`make_pettingzoo_env`):
    dotted identifiers (``"mpe2.simple_spread_v3"``, ``"my_games.duel"``), or one identifier
    that names an importable top-level module (``"my_game"``). Gymnasium ids (``"CartPole-v1"``,
    ``"module:Id-v0"``, ``"ALE/Pong-v5"``) never are.

    >>> [is_env_module_name(n) for n in ("mpe2.simple_spread_v3", "CartPole-v1", "a:B-v0")]
    [True, False, False]
    """
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return False
    if len(parts) > 1:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _pettingzoo_module(path: str) -> Any:
    """The multi-agent env module ``path``; `ConfigError` naming it if it cannot be imported
    or has neither ``parallel_env`` nor ``env`` (naming, for a module outside PettingZoo, both
    things the name could have been: a Gymnasium id and such a module)."""
    own = path.startswith(PETTINGZOO_PREFIX)
    try:
        module = importlib.import_module(path)
    except ImportError as err:
        if own:
            raise ConfigError(
                f"make_env_creator: env {path!r} names a PettingZoo module that could not be "
                f'imported ({err}); install PettingZoo (pip install "rl-flow[multiagent]") and '
                "the env family's extras, or fix the module path (e.g. pettingzoo.classic.rps_v2)"
            ) from None
        raise ConfigError(
            f"make_env_creator: env {path!r} is not a registered Gymnasium id, and as a module "
            f"path it could not be imported ({err}); name a Gymnasium id (CartPole-v1, "
            "'module:Id-v0' to import the module that registers it) or an importable module "
            "with PettingZoo's parallel_env() or env() (mpe2.simple_spread_v3, "
            "pettingzoo.classic.rps_v2, a package of your own on sys.path)"
        ) from None
    if not callable(getattr(module, "parallel_env", None)) and not callable(
        getattr(module, "env", None)
    ):
        raise ConfigError(
            f"make_env_creator: env {path!r}: the module has neither parallel_env nor env, and "
            "the name is not a registered Gymnasium id; name a module with PettingZoo's "
            "parallel_env() or env() (mpe2.simple_spread_v3, pettingzoo.butterfly.pistonball_v6) "
            "or a Gymnasium id (CartPole-v1, 'module:Id-v0')"
        )
    return module


def make_pettingzoo_env(path: str, **env_kwargs: Any) -> Any:
    """Build the multi-agent env of module ``path`` with ``env_kwargs``: any importable module
    that has PettingZoo's constructors (``"pettingzoo.classic.rps_v2"``,
    ``"mpe2.simple_spread_v3"``, a package of your own): its ``parallel_env``, else its AEC
    ``env`` (a turn-based game is played turn by turn:
    `rlflow.envs.multi_agent.PettingZooAECEnv`), adapted to a
    `rlflow.envs.multi_agent.MultiAgentEnv`."""
    from rlflow.envs.ma_envs import make_multi_agent_env

    module = _pettingzoo_module(path)
    build = getattr(module, "parallel_env", None)
    return make_multi_agent_env(build if callable(build) else module.env, **env_kwargs)


def _apply_wrappers(creator: Callable[[], Any], wrappers: tuple[Any, ...]) -> Any:
    """``creator()`` wrapped by each `rlflow.config.rollouts.WrapperSpec` in order."""
    from rlflow.config.rollouts import resolve_wrapper

    env = creator()
    if not isinstance(env, gym.Env):
        raise ConfigError(
            f"env_wrappers: the env is a {type(env).__name__}, not a gymnasium.Env; Gymnasium "
            "wrappers apply to single-agent envs only"
        )
    for spec in wrappers:
        env = resolve_wrapper(spec.name, "env_wrappers")(env, **spec.kwargs)
    return env


def inner_creator(creator: Callable[[], Any]) -> Callable[[], Any]:
    """The creator under `flatten_if_structured` (as `config_env_creator` wraps it), else
    ``creator`` itself: what an engine that builds the env its own way reads."""
    if isinstance(creator, functools.partial) and creator.func is flatten_if_structured:
        return creator.args[0] if len(creator.args) == 1 else creator
    return creator


def flatten_if_structured(creator: Callable[[], Any]) -> Any:
    """``creator()``, wrapped in `rlflow.envs.flatten.FlattenObservations` when it is a
    single-agent env whose observation space is a ``Dict``, ``Tuple``, ``MultiDiscrete`` or
    ``MultiBinary`` that can be flattened (`rlflow.envs.flatten.needs_flattening`), in
    `rlflow.envs.flatten.FlattenMultiAgentObservations` when it is a multi-agent env (PettingZoo
    ones adapted first) with such an agent space; any other env as it is."""
    from rlflow.envs.flatten import (
        FlattenMultiAgentObservations,
        FlattenObservations,
        needs_flattening,
    )

    env = creator()
    if isinstance(env, gym.Env):
        return FlattenObservations(env) if needs_flattening(env.observation_space) else env
    agents = getattr(env, "possible_agents", None)
    if agents is None:
        return env
    from rlflow.envs.multi_agent import MultiAgentEnv, from_pettingzoo

    spaces_of = getattr(env, "observation_spaces", None)
    if not isinstance(spaces_of, dict):  # PettingZoo: a method per agent
        spaces_of = {agent: env.observation_space(agent) for agent in agents}
    if not any(needs_flattening(space) for space in spaces_of.values()):
        return env
    return FlattenMultiAgentObservations(
        env if isinstance(env, MultiAgentEnv) else from_pettingzoo(env)
    )


def config_env_creator(config: Any) -> EnvCreator:
    """The env creator of a config: `make_env_creator` of ``config.env`` with
    ``config.env_config``, each env wrapped by ``config.env_wrappers`` in order, then its
    observations flattened if they are structured (`flatten_if_structured`: Dict, Tuple,
    MultiDiscrete and MultiBinary observations become one float32 vector, Discrete parts
    one-hot; see `rlflow.envs.flatten`), then, with ``config.groups``, its agents grouped into
    teams (`rlflow.envs.groups.group_agents`), and with ``config.common_reward`` every agent paid
    the team's reward (`rlflow.envs.common_reward.common_reward`)."""
    from rlflow.config.rollouts import wrapper_specs

    creator = make_env_creator(config.env, **config.env_config)
    wrappers = tuple(wrapper_specs(config.env_wrappers, "env_wrappers"))
    if wrappers:
        creator = functools.partial(_apply_wrappers, creator, wrappers)
    flat = functools.partial(flatten_if_structured, creator)
    grouped: Any = flat
    groups = getattr(config, "groups", None)
    if groups:
        from rlflow.envs.groups import group_agents

        grouped = functools.partial(group_agents, flat, dict(groups))
    if getattr(config, "common_reward", False):
        from rlflow.envs.common_reward import common_reward

        scalarisation = getattr(config, "reward_scalarisation", "sum")
        return functools.partial(common_reward, grouped, scalarisation)  # type: ignore[return-value]
    return grouped  # type: ignore[no-any-return]


def make_env_creator(env: str | Callable[..., gym.Env[Any, Any]], **env_kwargs: Any) -> EnvCreator:
    """Return a zero-argument creator for ``env``, checking Gymnasium ids eagerly.

    ``env`` is either a registered Gymnasium id (``"CartPole-v1"``, or ``"module:Id-v0"`` to
    import the module that registers it) or a callable returning a `gymnasium.Env`.
    ``env_kwargs`` are passed to `gymnasium.make` or to the callable on every call. The creator
    is a `functools.partial`, so it pickles when ``env`` does (needed to ship it to actors).

    Atari ids (``"ALE/Pong-v5"``, any id starting with ``"ALE/"``) are built by `make_ale_env`
    with the DeepMind preprocessing of `rlflow.envs.atari.make_atari`: uint8 ``(84, 84, 4)``
    observations, which the models feed to `rlflow.models.nets.NatureCNN`. Pass
    ``deepmind=False`` (``env_config={"deepmind": False}``) for the raw ALE env. ale-py must be
    installed (`ConfigError` otherwise).

    Names in `rlflow.envs.ma_envs.MULTI_AGENT_ENVS` (``"multi_cartpole"``, ``"two_team_grid"``)
    build multi-agent envs (`rlflow.envs.multi_agent.MultiAgentEnv`); a callable may also
    return one, or a PettingZoo env (rollout workers adapt it with ``from_pettingzoo``). The
    dotted name of any module with PettingZoo's ``parallel_env()`` or ``env()``
    (``"pettingzoo.butterfly.pistonball_v6"``, ``"mpe2.simple_spread_v3"``, a package of your
    own on ``sys.path``; `is_env_module_name`) that is not a registered Gymnasium id builds
    that module's ``parallel_env(**env_kwargs)`` (or AEC ``env``) with `make_pettingzoo_env`;
    the module is imported here, so a wrong path fails at once.

    Raises `ConfigError` for an unknown id (naming the id and the closest registered ids), for
    a dotted name that is neither a Gymnasium id nor such a module (naming both), or for an
    ``env`` that is neither a string nor callable. No environment is built here.

    Example:
        >>> creator = make_env_creator("CartPole-v1", max_episode_steps=10)
        >>> creator().spec.max_episode_steps
        10
    """
    if isinstance(env, str):
        from rlflow.envs.ma_envs import MULTI_AGENT_ENVS, make_multi_agent_env

        if env in MULTI_AGENT_ENVS:
            # A multi-agent env is not a gym.Env; rollout workers tell the two apart.
            return functools.partial(make_multi_agent_env, env, **env_kwargs)  # type: ignore[return-value]
    if isinstance(env, str) and env not in gym.registry and is_env_module_name(env):
        _pettingzoo_module(env)
        return functools.partial(make_pettingzoo_env, env, **env_kwargs)
    if isinstance(env, str) and env.startswith(ALE_PREFIX):
        from rlflow.envs.atari import register_ale_envs

        register_ale_envs()
        _check_registered(env)
        return functools.partial(make_ale_env, env, **env_kwargs)
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

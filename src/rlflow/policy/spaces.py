"""Which spaces and models a policy takes: one rule, checked first when a policy is built.

Every `rlflow.policy.TorchPolicy` class declares what it takes in three class attributes:
``observation_space_types`` and ``action_space_types`` (gymnasium space classes) and
``supports_custom_model`` (whether ``model.custom_model`` may replace its network).
:func:`check_policy_spaces` checks them at the start of the policy's constructor and raises
`ConfigError` naming the policy, the space and what it takes. A `rlflow.Trainer` builds its
learner's rollout worker (every policy of the run, on one probe env's spaces) on the driver
before any backend or actor starts, and that message gains the algorithm's and the env's names
(`rlflow.workers.RolloutWorker`): ``rlflow train dqn --env Pendulum-v1`` ends there.

Structured observations (``Dict``, ``Tuple``, ``MultiDiscrete``, ``MultiBinary``) never reach a
policy: the env creator flattens them (`rlflow.envs.flatten`); one holding a part that cannot
be flattened (``Text``, ``Graph``, ``Sequence``) is refused here, naming the part.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlflow.config.model import ModelConfig
from rlflow.envs.flatten import unflattenable_part
from rlflow.errors import ConfigError

__all__ = ["ALGORITHMS_FOR_ACTIONS", "check_custom_model_support", "check_policy_spaces"]

_ON_POLICY = ("pg", "a2c", "a3c", "ppo", "ddppo", "impala", "appo")
ALGORITHMS_FOR_ACTIONS: dict[str, tuple[str, ...]] = {
    "Discrete": (*_ON_POLICY, "dqn", "apex", "r2d2", "apex_r2d2", "es", "ars", "dreamerv3"),
    "MultiDiscrete": _ON_POLICY,
    "Box": (*_ON_POLICY, "sac", "td3", "apex_td3", "apex_ddpg", "es", "ars", "dreamerv3"),
}
"""The algorithms that take each kind of action space, for the hint of a refusal: every
registered algorithm but those that need more than an env (bc, marwil, cql: recorded data;
maml: task-settable envs; ppo_dqn: its two learners' agents; mappo, maddpg, matd3, qmix, vdn:
a team, ``groups``; alpha_zero: games it can copy). A test checks it against the registered
policies' ``action_space_types``."""

_CUSTOM_MODEL_ALGORITHMS = "pg, a2c, a3c, ppo, impala, appo"


def _names(types: tuple[type, ...]) -> str:
    """``"Box or Discrete"``, ``"Discrete, MultiDiscrete or Box"``."""
    names = [t.__name__ for t in types]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _obs_problem(space: gym.Space[Any], types: tuple[type, ...]) -> str | None:
    """Why a policy taking ``types`` cannot take observations of ``space`` (None: it can)."""
    if isinstance(space, types):
        return None
    note = ""
    if isinstance(space, gym.spaces.Dict | gym.spaces.Tuple):
        part = unflattenable_part(space)
        if part is not None:
            note = f": its part {part[0]} is {part[1]}, which cannot be flattened"
        else:
            note = (
                "; the env creator flattens such observations, so a policy is given the flat "
                "space (rlflow.envs.flatten_space), e.g. in its PolicySpec"
            )
    return (
        f"observation spaces, not {space}{note} (the env creator flattens Dict, Tuple, "
        "MultiDiscrete and MultiBinary observations made of Box, Discrete, MultiDiscrete and "
        "MultiBinary parts)"
    )


def check_policy_spaces(
    policy_cls: type, observation_space: gym.Space[Any], action_space: gym.Space[Any]
) -> None:
    """Raise `ConfigError` unless ``policy_cls`` takes both spaces (its
    ``observation_space_types`` and ``action_space_types``); the message names the policy,
    the space, what the policy takes and which algorithms take such actions.

    >>> from rlflow.policy import TorchPolicy
    >>> check_policy_spaces(TorchPolicy, gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2))
    >>> check_policy_spaces(TorchPolicy, gym.spaces.Box(-1, 1, (3,)), gym.spaces.MultiBinary(2))
    Traceback (most recent call last):
    ...
    rlflow.errors.ConfigError: TorchPolicy takes Discrete, MultiDiscrete or Box action spaces, \
not MultiBinary(2)
    """
    name = policy_cls.__name__
    obs_types: tuple[type, ...] = policy_cls.observation_space_types  # type: ignore[attr-defined]
    act_types: tuple[type, ...] = policy_cls.action_space_types  # type: ignore[attr-defined]
    problem = _obs_problem(observation_space, obs_types)
    if problem is not None:
        raise ConfigError(f"{name} takes {_names(obs_types)} {problem}")
    if not isinstance(action_space, act_types):
        kind = type(action_space).__name__
        others = ALGORITHMS_FOR_ACTIONS.get(kind)
        hint = f"; algorithms for {kind} actions: {', '.join(others)}" if others else ""
        raise ConfigError(
            f"{name} takes {_names(act_types)} action spaces, not {action_space}{hint}"
        )


def check_custom_model_support(policy_cls: type, model: ModelConfig) -> None:
    """Raise `ConfigError` naming ``model.custom_model`` when ``model`` sets one and
    ``policy_cls`` does not take custom models (``supports_custom_model``)."""
    custom = model.custom_model
    if custom is None or getattr(policy_cls, "supports_custom_model", False):
        return
    raise ConfigError(
        f"model.custom_model={custom!r}: {policy_cls.__name__} builds its own networks and "
        "takes no custom model; custom models (forward(obs) -> (dist_inputs, value), "
        f"value(obs)) fit the actor-critic algorithms: {_CUSTOM_MODEL_ALGORITHMS}"
    )

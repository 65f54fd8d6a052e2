"""`RolloutConfig`: the field group of how rollout workers collect experience: the env (its id
or creator, keyword arguments, Gymnasium wrappers named in the config, observation filter and
vector engine), how many workers and envs sample, how long a fragment is, and the seed.

One of the groups `rlflow.config.AlgorithmConfig` is built from. The wrappers are applied by the
env creator that `rlflow.envs.config_env_creator` builds from a config; `rlflow.filters` holds
the observation filters, `rlflow.envs.gym_vector` the vector engines.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rlflow.checks import check_type
from rlflow.config.group import FieldGroup
from rlflow.errors import ConfigError

__all__ = [
    "OBSERVATION_FILTERS",
    "REWARD_SCALARISATIONS",
    "VECTOR_ENVS",
    "RolloutConfig",
    "WrapperSpec",
    "check_reward_scalarisation",
    "resolve_wrapper",
    "wrapper_specs",
]

OBSERVATION_FILTERS = ("NoFilter", "MeanStdFilter")
"""The values of ``observation_filter`` (RLlib's names); see `rlflow.filters`."""
REWARD_SCALARISATIONS = ("sum", "mean")
"""The values of ``reward_scalarisation`` (EPyMARL's); see `rlflow.envs.common_reward`."""


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


VECTOR_ENVS = (
    "auto",
    "rlflow",
    "gymnasium",
    "gymnasium-sync",
    "gymnasium-async",
    "envpool",
    "ale-vector",
)
"""The values of ``vector_env``, the env engine of a rollout worker (`rlflow.envs.gym_vector`)."""


def check_reward_scalarisation(value: Any, label: str = "reward_scalarisation") -> None:
    """`ConfigError` naming ``label`` unless ``value`` is one of `REWARD_SCALARISATIONS`."""
    if value not in REWARD_SCALARISATIONS:
        raise ConfigError(
            f"{label}={value!r}: must be one of {', '.join(repr(s) for s in REWARD_SCALARISATIONS)}"
        )


def check_groups(groups: Any, label: str = "groups") -> dict[str, list[Any]]:
    """``groups`` checked: a dict of group id -> non-empty list of agent ids, no agent in two
    groups; `ConfigError` naming ``label`` otherwise."""
    if not isinstance(groups, Mapping):
        raise ConfigError(f"{label}={groups!r}: must be a dict of group id -> list of agent ids")
    checked: dict[str, list[Any]] = {}
    owner: dict[Any, str] = {}
    for name, members in groups.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{label}: group id {name!r} must be a non-empty string")
        if isinstance(members, str) or not isinstance(members, list | tuple) or not members:
            raise ConfigError(f"{label}.{name}={members!r}: must be a non-empty list of agent ids")
        for agent in members:
            if agent in owner:
                raise ConfigError(
                    f"{label}: agent {agent!r} is in two groups ({owner[agent]!r} and {name!r}); "
                    "an agent belongs to at most one group"
                )
            owner[agent] = name
        checked[name] = list(members)
    return checked


@dataclass(frozen=True, kw_only=True)
class RolloutConfig(FieldGroup):
    """The env, the rollout workers and their envs, fragments and the seed."""

    env: str | Callable[[], Any] = "CartPole-v1"
    """Gymnasium id (e.g. ``"CartPole-v1"``) or a zero-argument callable returning an env.
    MAML needs a task-settable env, ``ppo_dqn`` a multi-agent one (their defaults are)."""
    env_config: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make`` (or the creator)."""
    env_wrappers: list[Any] = field(default_factory=list)
    """Gymnasium wrappers around each env, applied in order (the first wraps the raw env):
    each a dotted path (``"gymnasium.wrappers.ClipAction"``) or a dict ``{"name": path,
    "kwargs": {...}}`` (``Wrapper(env, **kwargs)``). An unknown name is a `ConfigError` naming
    it. Single-agent Gymnasium envs only. Empty: none."""
    groups: dict[str, list[Any]] = field(default_factory=dict)
    """Multi-agent: teams of agents that act as one (group id -> its agents, e.g. ``{"team":
    ["agent_0", "agent_1", "agent_2"]}``): each group becomes one agent of the env
    (`rlflow.envs.groups.GroupAgents`) whose rows hold its members' observations, actions and
    the global state, rewarded with the sum of its members' rewards; team algorithms (QMIX,
    VDN, MADDPG, MAPPO) learn from them. An agent belongs to at most one group; a group naming
    an agent the env does not have is a `ConfigError` before any actor starts. Empty: none."""
    common_reward: bool = False
    """Multi-agent: pay every agent the same reward each step, the team's (EPyMARL's
    ``common_reward``; `rlflow.envs.common_reward.CommonReward`): the agents' rewards of the step
    combined by ``reward_scalarisation``. It puts independent learners (PPO, DQN without
    ``groups``) on the team algorithms' reward, as EPyMARL's benchmark does; applied after
    ``groups`` (a group is one agent, paid its members' sum). ``episode_return_mean`` then sums
    what the agents were paid: with ``"sum"`` the number of agents times the env's team return.
    A single-agent env is a `ConfigError`. False: each agent its own reward."""
    reward_scalarisation: str = "sum"
    """How ``common_reward`` combines a step's rewards (EPyMARL's name): ``"sum"`` (the team
    reward of QMIX, VDN, MADDPG and MAPPO's groups) or ``"mean"`` (the sum over the number of
    agents in the step). Read only with ``common_reward``."""
    vector_env: str = "auto"
    """The env engine of each rollout worker (`rlflow.envs.gym_vector`): ``"rlflow"`` (N envs
    stepped in one in-process loop), ``"gymnasium-sync"`` / ``"gymnasium-async"``
    (``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv``, the same trajectories),
    ``"gymnasium"`` (``gymnasium.make_vec`` with the env's vectorized entry point where it
    registers one, such as CartPole-v1's numpy ``CartPoleVectorEnv``, else sync),
    ``"envpool"`` (the ``envpool`` extra: EnvPool's C++ envs, classic control and ``ALE/...``
    games with rlflow's DeepMind preprocessing, `rlflow.envs.envpool_env`), ``"ale-vector"``
    (ale_py's C++ ``AtariVectorEnv`` for ``ALE/...`` games, `rlflow.envs.ale_vector`; the two
    give rlflow's observations and game scores, with documented differences at reset and after
    a lost life) or ``"auto"``: the fastest engine measured for the env's family among those
    that give rlflow's trajectories exactly (`rlflow.envs.gym_vector.EXACT_ENGINES`),
    ``"rlflow"`` so far: the C++ engines step faster but are picked only by name. Only
    ``"rlflow"`` restarts failed sub-envs and steps multi-agent envs
    (another explicit value is a `ConfigError` then; ``"auto"`` picks ``"rlflow"``)."""
    observation_filter: str = "NoFilter"
    """``"NoFilter"`` or ``"MeanStdFilter"`` (RLlib's names). ``"MeanStdFilter"``: each rollout
    worker normalizes every observation element by a running mean and std, ``(x - mean) / (std
    + 1e-8)`` clipped to [-10, 10], before the policy sees it (sample batches hold the filtered
    observations); one filter per policy. Once per training iteration the learner merges the
    workers' new statistics and sends the merged filter back (`rlflow.filters`,
    `rlflow.ops.filters`). Evaluation, `rlflow.Trainer.compute_actions` and exported policies
    apply the learner's filter frozen; checkpoints hold it. Box observations only, not images
    (`ConfigError` otherwise)."""
    num_workers: int = 2
    """Remote rollout workers (actors), >= 0; 0 samples on the local (learner) worker. IMPALA,
    APPO and Ape-X need >= 1 (their learner never samples), as does MAML (one task per worker:
    the meta-batch size)."""
    min_workers: int | None = None
    """The fewest remote rollout workers a run starts with, 1 <= min_workers <= num_workers
    (it needs one to sample); None: all ``num_workers`` (a run the cluster cannot hold at once
    is refused or waits, ``cluster_wait_s``). Below ``num_workers`` the run is elastic on a Ray
    cluster: it starts the workers that fit now (waiting up to the start timeout for at least
    ``min_workers``), asks Ray's autoscaler for the rest (``ray.autoscaler.sdk.
    request_resources``) and starts each on a node that joins, with the learner's weights,
    between iterations; a node lost shrinks the run, whose workers come back with capacity.
    A placement group cannot be reserved in part, so elastic workers get none: each reserves
    its own resources and Ray places it where they are free; ``placement_strategy`` PACK is
    Ray's default placement, SPREAD Ray's SPREAD scheduling, and STRICT_PACK and STRICT_SPREAD
    are refused. Learner actors (``num_learners``) keep a group of their own. Ignored on the
    local backend (everything runs in the driver). DD-PPO and AlphaZero refuse it."""
    num_envs_per_worker: int | str = 1
    """Envs stepped in one vectorized loop inside each worker, >= 1 (MAML: the episodes sampled
    per task and adaptation step), or ``"auto"``: chosen on the driver before any actor starts,
    from a short measurement of the env's step and the policy's forward per env
    (`rlflow.workers.envs_per_worker`: the smallest of 8, 16, 32, 64 whose forward per env
    costs at most 25% of the env's step; where none does, the one with the least env step +
    forward per env). Opt-in: it sets the fragment
    size and the envs' seeds, so such a run may differ between machines; the
    `rlflow.Trainer`'s config holds the number chosen."""
    rollout_fragment_length: int = 200
    """Env steps per env in one ``sample()`` call of a worker, >= 1 (A3C: one gradient per
    sample; MAML: the env's horizon, so that every sample holds whole episodes)."""
    seed: int | None = 0
    """Seed of envs, policies and sampling; None for fresh entropy every run."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.env, str) or callable(self.env)):
            raise self._bad("env", "must be a Gymnasium id or a zero-argument env creator")
        if not isinstance(self.env_config, dict):
            raise self._bad("env_config", "must be a dict of env keyword arguments")
        name = type(self).__name__
        wrapper_specs(self.env_wrappers, f"{name}.env_wrappers")
        object.__setattr__(self, "groups", check_groups(self.groups, f"{name}.groups"))
        check_type(self.common_reward, f"{name}.common_reward", bool, "True or False")
        check_reward_scalarisation(self.reward_scalarisation, f"{name}.reward_scalarisation")
        label = f"{name}.observation_filter"
        check_type(self.observation_filter, label, str, "'NoFilter' or 'MeanStdFilter'")
        if self.observation_filter not in OBSERVATION_FILTERS:
            close = difflib.get_close_matches(self.observation_filter, OBSERVATION_FILTERS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{label}={self.observation_filter!r}: must be one of "
                f"{', '.join(repr(f) for f in OBSERVATION_FILTERS)}{hint}"
            )
        if self.vector_env not in VECTOR_ENVS:
            raise ConfigError(
                f"{name}.vector_env={self.vector_env!r}: must be one of "
                f"{', '.join(repr(v) for v in VECTOR_ENVS)}"
            )
        self._check_int("num_workers", 0)
        if self.min_workers is not None:
            self._check_int("min_workers", 1)
            self._check_le("min_workers", "num_workers")
        if self.num_envs_per_worker != "auto":
            if isinstance(self.num_envs_per_worker, str):
                raise self._bad("num_envs_per_worker", "must be an integer >= 1 or 'auto'")
            self._check_int("num_envs_per_worker", 1)
        self._check_int("rollout_fragment_length", 1)
        if self.seed is not None:
            self._check_int("seed", 0)

    def envs_per_worker(self) -> int:
        """``num_envs_per_worker`` as a number; a `ConfigError` while it is ``"auto"``, which
        a `rlflow.Trainer` resolves before any actor starts
        (`rlflow.workers.envs_per_worker.resolve_num_envs_per_worker`)."""
        if self.num_envs_per_worker == "auto":
            raise ConfigError(
                f"{type(self).__name__}.num_envs_per_worker='auto' is resolved by a Trainer "
                "before its workers start; outside one, resolve it with rlflow.workers."
                "envs_per_worker.resolve_num_envs_per_worker(config, policy_cls) or set a number"
            )
        return int(self.num_envs_per_worker)

    def elastic(self) -> bool:
        """Whether the run may start with fewer than ``num_workers`` remote workers and grow
        (``min_workers`` below ``num_workers``)."""
        return self.min_workers is not None and self.min_workers < self.num_workers

    def workers_to_start(self) -> int:
        """The remote workers a run needs before it starts: ``min_workers``, or all
        ``num_workers`` when it is None."""
        return self.num_workers if self.min_workers is None else self.min_workers

"""Algorithm configs: one frozen, keyword-only dataclass per algorithm.

:class:`AlgorithmConfig` holds the fields every algorithm shares (RLlib's names where the meaning
is the same); each algorithm subclasses it and adds its own. Validation runs in ``__post_init__``
and raises :class:`~rlflow.errors.ConfigError` naming class, field, value and rule, before any
actor starts. :meth:`AlgorithmConfig.from_dict` rejects unknown keys with the closest valid name.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rlflow.checks import check_int, check_number
from rlflow.config.model import check_model, import_object
from rlflow.config.rollouts import EnvRunConfig
from rlflow.errors import ConfigError
from rlflow.schedules import PiecewiseSchedule

C = TypeVar("C", bound="AlgorithmConfig")

DEFAULT_POLICY_ID = "default_policy"
"""The id of the only policy of a single-agent run."""


@dataclass(frozen=True, kw_only=True)
class PolicySpec:
    """One policy of a multi-agent run: its class, spaces and config (all optional).

    Example (PPO for one policy, DQN for another, as the ``ppo_dqn`` algorithm does)::

        AlgorithmConfig(
            env="multi_cartpole",
            policies={
                "ppo_policy": PolicySpec(policy_class=PPOPolicy, config=PPOConfig(...)),
                "dqn_policy": PolicySpec(policy_class=DQNPolicy, config=DQNConfig(...)),
            },
            policy_mapping_fn=lambda agent_id: ...,
        )
    """

    policy_class: type | None = None
    """A `rlflow.policy.TorchPolicy` subclass (or ``"module:Class"``); None: the algorithm's."""
    observation_space: Any = None
    """The policy's observation space; None: that of the first agent mapped to it."""
    action_space: Any = None
    """The policy's action space; None: that of the first agent mapped to it."""
    config: Any = None
    """The policy's settings: an `AlgorithmConfig` (used whole), a dict of overrides of the run's
    config (keys checked against the config class, so a typo is a `ConfigError`), or None (the
    run's config). The policy gets an instance of its class's ``config_class``
    (:meth:`policy_config`)."""

    def __post_init__(self) -> None:
        if isinstance(self.policy_class, str):
            object.__setattr__(
                self, "policy_class", import_object(self.policy_class, "PolicySpec.policy_class")
            )
        if self.policy_class is not None and not isinstance(self.policy_class, type):
            raise ConfigError(
                f"PolicySpec.policy_class={self.policy_class!r} must be a TorchPolicy subclass, "
                "'module:Class', or None"
            )
        if self.config is not None and not isinstance(self.config, dict | AlgorithmConfig):
            raise ConfigError(
                f"PolicySpec.config={self.config!r} must be an AlgorithmConfig, a dict of "
                "overrides, or None"
            )

    def config_class(
        self, run_config: AlgorithmConfig, policy_config_class: type[AlgorithmConfig]
    ) -> type[AlgorithmConfig]:
        """The class of the config the policy is built with, whose fields the overrides name.

        ``policy_config_class`` is the policy class's ``config_class``. The run's config (or
        this spec's `AlgorithmConfig`) is used as it is when it is one of those (a subclass,
        e.g. `A2CConfig` for `PGPolicy`); else the policy gets a ``policy_config_class``.
        """
        base = self.config if isinstance(self.config, AlgorithmConfig) else run_config
        return type(base) if isinstance(base, policy_config_class) else policy_config_class

    def policy_config(
        self, run_config: AlgorithmConfig, policy_config_class: type[C]
    ) -> AlgorithmConfig:
        """The typed config the policy reads, given the run's config.

        The base is this spec's `AlgorithmConfig`, else the run's config; a dict of overrides
        is applied through the config class, so an unknown key raises `ConfigError` naming
        the closest valid field. A base of another class than ``policy_config_class`` (a PG
        policy in a PPO run, ``ppo_dqn``'s run config) gives a ``policy_config_class`` built
        from the fields both classes have, then the overrides.
        """
        base = self.config if isinstance(self.config, AlgorithmConfig) else run_config
        overrides = dict(self.config) if isinstance(self.config, dict) else {}
        cls = self.config_class(run_config, policy_config_class)
        cls.check_keys(overrides)
        if isinstance(base, cls):
            return base.replace(**overrides) if overrides else base
        names = set(cls.field_names())
        shared = {k: v for k, v in base.to_dict().items() if k in names}
        return cls.from_dict({**shared, **overrides})


@dataclass(frozen=True, kw_only=True)
class AlgorithmConfig(EnvRunConfig):
    """Fields shared by every algorithm; subclasses add theirs and call super's post-init.

    The failure fields (``recreate_failed_workers``, ...) come from `FailureConfig`, the
    resources from `ResourceConfig`, ``loggers`` from `LoggingConfig`, ``env_wrappers`` and the
    evaluation fields from `EnvRunConfig`.
    """

    env: str | Callable[[], Any] = "CartPole-v1"
    """Gymnasium id (e.g. ``"CartPole-v1"``) or a zero-argument callable returning an env."""
    env_config: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make`` (or the creator)."""
    num_workers: int = 2
    """Remote rollout workers (actors), >= 0; 0 samples on the local (learner) worker."""
    num_envs_per_worker: int = 1
    """Envs stepped in one vectorized loop inside each worker, >= 1."""
    rollout_fragment_length: int = 200
    """Env steps per env in one ``sample()`` call of a worker, >= 1."""
    train_batch_size: int = 4000
    """Env steps per training batch, >= 1."""
    gamma: float = 0.99
    """Discount factor, in [0, 1]."""
    lr: float = 5e-4
    """Learning rate (Adam), > 0."""
    lr_schedule: list[list[float]] | None = None
    """``[[timestep, lr], ...]`` (timesteps from 0, nondecreasing; env steps sampled): the
    learner's lr, linear in between and flat after the last point; overrides ``lr``."""
    grad_clip: float | None = None
    """Clip gradients by this global norm (> 0), or None for no clipping."""
    model: dict[str, Any] = field(default_factory=dict)
    """Model options: ``hidden`` (tuple of layer sizes), ``activation``, ``shared``; or a
    user's network, ``custom_model`` (``"package.module:Class"`` or the class; see
    `rlflow.models.custom`) with ``custom_model_config`` (a dict of its options)."""
    seed: int | None = 0
    """Seed of envs, policies and sampling; None for fresh entropy every run."""
    num_torch_threads: int = 1
    """Torch intra-op threads per process (learner and each worker), >= 1."""
    min_time_s_per_iteration: float = 0.0
    """An iteration (one ``train()`` result) lasts at least this long, in seconds, >= 0."""
    min_steps_per_iteration: int = 0
    """An iteration samples at least this many env steps, >= 0 (RLlib's
    ``timesteps_per_iteration``)."""
    metrics_num_episodes_for_smoothing: int = 100
    """Episode return/length means are over at most this many recent episodes, >= 1."""
    policies: dict[str, PolicySpec] = field(default_factory=dict)
    """Multi-agent: policy id -> `PolicySpec` (a plain dict with its fields works too).
    Empty: one policy, ``"default_policy"``, acts for every agent."""
    policy_mapping_fn: Callable[[str], str] | None = None
    """Multi-agent: agent id -> policy id (or ``"module:function"``), fixed for an agent within
    an episode; must be picklable to reach remote workers. None: every agent to the only
    policy (allowed with at most one entry in ``policies``)."""
    policies_to_train: list[str] | None = None
    """Ids of the policies that learn (the others only act); None: all of them."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_env()
        self._check_int("num_workers", 0)
        self._check_int("num_envs_per_worker", 1)
        self._check_int("rollout_fragment_length", 1)
        self._check_int("train_batch_size", 1)
        self._check_range("gamma", 0.0, 1.0)
        self._check_positive("lr")
        if self.lr_schedule is not None:
            PiecewiseSchedule.from_points(self.lr_schedule, self._label("lr_schedule"))
        if self.grad_clip is not None:
            self._check_positive("grad_clip")
        if self.seed is not None:
            self._check_int("seed", 0)
        self._check_int("num_torch_threads", 1)
        self._check_range("min_time_s_per_iteration", 0.0, float("inf"))
        self._check_int("min_steps_per_iteration", 0)
        self._check_int("metrics_num_episodes_for_smoothing", 1)
        self._check_multi_agent()

    # ----------------------------------------------------------------------- validation
    def _bad(self, name: str, rule: str) -> ConfigError:
        value = getattr(self, name)
        return ConfigError(f"{type(self).__name__}.{name}={value!r} {rule}")

    def _check_env(self) -> None:
        if not (isinstance(self.env, str) or callable(self.env)):
            raise self._bad("env", "must be a Gymnasium id or a zero-argument env creator")
        if not isinstance(self.env_config, dict):
            raise self._bad("env_config", "must be a dict of env keyword arguments")
        check_model(self.model, self._label("model"))

    def _check_multi_agent(self) -> None:
        specs = self._policy_specs_checked()
        object.__setattr__(self, "policies", specs)
        self._check_mapping_fn(len(specs))
        if self.policies_to_train is not None:
            known = self.policy_ids()
            bad = [p for p in self.policies_to_train if p not in known]
            if isinstance(self.policies_to_train, str) or bad:
                raise self._bad("policies_to_train", f"must be a list of policy ids from {known}")

    def _policy_specs_checked(self) -> dict[str, PolicySpec]:
        """`policies` with each entry a checked `PolicySpec` (dicts converted)."""
        if not isinstance(self.policies, dict):
            raise self._bad("policies", "must be a dict of policy id -> PolicySpec")
        specs: dict[str, PolicySpec] = {}
        for pid, spec in self.policies.items():
            if not isinstance(pid, str) or not pid:
                raise self._bad("policies", f"has key {pid!r}; policy ids are non-empty strings")
            if isinstance(spec, dict):
                unknown = set(spec) - {f.name for f in dataclasses.fields(PolicySpec)}
                if unknown:
                    raise self._bad(
                        "policies",
                        f"entry {pid!r} has unknown keys {sorted(unknown)}; PolicySpec fields "
                        "are policy_class, observation_space, action_space, config",
                    )
                spec = PolicySpec(**spec)
            if not isinstance(spec, PolicySpec):
                raise self._bad("policies", f"entry {pid!r} must be a PolicySpec or a dict")
            self._check_overrides(pid, spec)
            specs[pid] = spec
        return specs

    def _check_mapping_fn(self, num_policies: int) -> None:
        """Import a ``"module:function"`` mapping fn; one is needed with several policies."""
        fn = self.policy_mapping_fn
        if isinstance(fn, str):
            fn = import_object(fn, f"{type(self).__name__}.policy_mapping_fn")
            object.__setattr__(self, "policy_mapping_fn", fn)
        if fn is not None and not callable(fn):
            raise self._bad("policy_mapping_fn", "must be a function agent_id -> policy_id")
        if fn is None and num_policies > 1:
            raise self._bad(
                "policy_mapping_fn",
                f"must be given with more than one policy ({sorted(self.policies)}): it maps "
                "each agent id to a policy id",
            )

    def _check_overrides(self, pid: str, spec: PolicySpec) -> None:
        """Reject a misspelt override key now, before any worker starts (the policy class,
        when not given, is the algorithm's, whose config class this run's class extends)."""
        if not isinstance(spec.config, dict):
            return
        cls = type(self)
        if spec.policy_class is not None:
            cls = spec.config_class(self, policy_config_class(spec.policy_class))
        try:
            cls.check_keys(spec.config)
        except ConfigError as err:
            raise self._bad("policies", f"entry {pid!r}: config overrides: {err}") from None

    def policy_ids(self) -> list[str]:
        """The ids of the run's policies: the keys of `policies`, or ``["default_policy"]``."""
        return list(self.policies) or [DEFAULT_POLICY_ID]

    def policy_specs(self) -> dict[str, PolicySpec]:
        """`policies`, or one default `PolicySpec` under ``"default_policy"`` when empty."""
        return dict(self.policies) or {DEFAULT_POLICY_ID: PolicySpec()}

    def _label(self, name: str) -> str:
        return f"{type(self).__name__}.{name}"

    def _check_int(self, name: str, low: int) -> None:
        check_int(getattr(self, name), self._label(name), low=low)

    def _check_positive(self, name: str) -> None:
        check_number(getattr(self, name), self._label(name), low=0, low_open=True)

    def _check_range(self, name: str, low: float, high: float) -> None:
        check_number(getattr(self, name), self._label(name), low=low, high=high)

    def _check_le(self, name: str, other: str) -> None:
        """Raise unless field ``name`` <= field ``other`` (e.g. minibatch <= train batch)."""
        if getattr(self, name) > getattr(self, other):
            raise self._bad(name, f"must be <= {other}={getattr(self, other)!r}")

    # ------------------------------------------------------------------------ building
    @classmethod
    def field_names(cls) -> list[str]:
        """Names of all fields, in declaration order."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def check_keys(cls, keys: Iterable[str]) -> None:
        """Raise :class:`ConfigError` for the first key that is not a field, naming the
        closest valid one."""
        names = cls.field_names()
        for key in keys:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"{cls.__name__} has no field {key!r}{hint}")

    @classmethod
    def from_dict(cls: type[C], values: Mapping[str, Any]) -> C:
        """Build from a mapping; unknown keys raise :class:`ConfigError` naming the closest
        valid field."""
        cls.check_keys(values)
        return cls(**dict(values))

    def replace(self: C, **changes: Any) -> C:
        """A copy with some fields changed (validated like a new config)."""
        type(self).check_keys(changes)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (the mapping policies read their keys from)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def field_type(cls, name: str) -> Any:
        """The resolved type annotation of field ``name``."""
        hints = typing.get_type_hints(cls)
        return hints[name]


@dataclass(frozen=True, kw_only=True)
class ActorCriticConfig(AlgorithmConfig):
    """The advantage settings of on-policy actor-critic algorithms (PG, A2C, A3C, PPO).

    `rlflow.policy.TorchPolicy` reads them to postprocess a trajectory (GAE or discounted
    returns); algorithms whose policies postprocess otherwise (DQN, IMPALA) do not have them.
    """

    use_critic: bool = True
    """Learn a value function; advantages are then returns (or GAE) minus V(s)."""
    use_gae: bool = True
    """Use GAE(``lambda_``) advantages (needs ``use_critic``)."""
    lambda_: float = 1.0
    """GAE lambda, in [0, 1] (only with ``use_gae``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_range("lambda_", 0.0, 1.0)
        if self.use_gae and not self.use_critic:
            raise self._bad("use_gae", "needs use_critic=True (GAE uses the critic)")


def policy_config_class(policy_class: type) -> type[AlgorithmConfig]:
    """The config class a policy class reads: its ``config_class`` (every `TorchPolicy` has
    one); `ConfigError` for a class without one."""
    config_class = getattr(policy_class, "config_class", None)
    if not (isinstance(config_class, type) and issubclass(config_class, AlgorithmConfig)):
        raise ConfigError(
            f"policy class {policy_class.__name__} must name the AlgorithmConfig subclass it "
            "reads in its config_class attribute (TorchPolicy subclasses do)"
        )
    return config_class


def resolve_policies(
    config: AlgorithmConfig, default_policy_class: type
) -> dict[str, tuple[type, AlgorithmConfig]]:
    """``{policy id: (policy class, typed policy config)}`` of a run, on the driver.

    Each spec's class (or ``default_policy_class``, the algorithm's) names its config class
    in ``config_class``; the spec's config is resolved through it (`PolicySpec.policy_config`),
    so a bad override raises `ConfigError` naming the policy, before any actor starts.
    """
    out: dict[str, tuple[type, AlgorithmConfig]] = {}
    for pid, spec in config.policy_specs().items():
        cls = spec.policy_class or default_policy_class
        try:
            out[pid] = (cls, spec.policy_config(config, policy_config_class(cls)))
        except ConfigError as err:
            raise ConfigError(f"policy {pid!r}: {err}") from None
    return out

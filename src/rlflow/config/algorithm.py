"""`AlgorithmConfig`: the fields every algorithm has, built from field groups; `PolicySpec` and
the multi-agent fields.

:class:`AlgorithmConfig` is one level of bases, the field groups (`RolloutConfig`, `TrainingConfig`,
`ReportingConfig`, `ResourceConfig`, `FailureConfig`, `OfflineConfig`), plus its own fields: the
two groups it holds whole (``model``, a `ModelConfig`; ``self_play``, a `SelfPlay` or None, each
given as a dict too), the multi-agent fields (``policies``, ``policy_mapping_fn``,
``policies_to_train``: they name policies, each with an `AlgorithmConfig` of its own, so they live
with it) and the methods that build configs (`from_dict`, `replace`, `to_dict`). Each
algorithm's config composes it with the groups it has (`rlflow.config.learning`) and its own
fields, and sets its defaults in its class statement (``defaults=``, see
`rlflow.config.group`). Validation runs in ``__post_init__`` and raises
:class:`~rlflow.errors.ConfigError` naming class, field, value and rule, before any actor starts.
:meth:`AlgorithmConfig.from_dict` rejects unknown keys with the closest valid name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rlflow.config.failures import FailureConfig
from rlflow.config.model import ModelConfig, import_object
from rlflow.config.offline import OfflineConfig
from rlflow.config.reporting import ReportingConfig
from rlflow.config.resources import ResourceConfig
from rlflow.config.rollouts import RolloutConfig
from rlflow.config.self_play import SelfPlay, SelfPlayMapping
from rlflow.config.training import TrainingConfig
from rlflow.errors import ConfigError

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
    snapshot_of: str | None = None
    """The id of the policy this one is a frozen copy of (self-play's pools, see
    `rlflow.config.self_play`): it has that policy's spaces when none are given, and never
    trains. None: a policy of its own."""

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
        from the fields both classes have (the model as the base's `model_overrides`, applied
        on top of the policy's own default model), then the overrides.
        """
        base = self.config if isinstance(self.config, AlgorithmConfig) else run_config
        overrides = dict(self.config) if isinstance(self.config, dict) else {}
        cls = self.config_class(run_config, policy_config_class)
        cls.check_keys(overrides)
        if isinstance(base, cls):
            return base.replace(**overrides) if overrides else base
        names = set(cls.field_names())
        fields = {**base.to_dict(), "model": base.model_overrides()}
        shared = {k: v for k, v in fields.items() if k in names}
        return cls.from_dict({**shared, **overrides})


@dataclass(frozen=True, kw_only=True)
class AlgorithmConfig(
    RolloutConfig,
    TrainingConfig,
    ReportingConfig,
    ResourceConfig,
    FailureConfig,
    OfflineConfig,
):
    """The fields every algorithm has: its field groups' and the multi-agent ones.

    Groups: `RolloutConfig` (env, workers, fragments, seed), `TrainingConfig` (batch, gamma,
    lr, grad_clip), `ReportingConfig` (loggers, iteration length, evaluation), `ResourceConfig`
    (CPUs, GPUs, placement, torch threads), `FailureConfig` (worker and env restarts,
    stragglers, what a checkpoint holds), `OfflineConfig` (recorded experience written and
    read); held whole: ``model`` (`ModelConfig`) and ``self_play`` (`SelfPlay`). An algorithm's
    config extends it (or a family's config) and changes defaults with ``defaults=``
    (``defaults={"model": ModelConfig(activation="relu")}`` for its network).
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    """The policy's network (`rlflow.config.model.ModelConfig`): the built-in one's
    ``hidden``, ``activation``, ``shared`` and memory (``use_lstm``, ...), or a
    ``custom_model``. Default: the algorithm's (two hidden layers of 64, tanh; DQN and Ape-X
    relu; SAC, TD3, CQL two of 256, relu; R2D2 with an LSTM). Given as a dict (a YAML
    ``model:`` block, ``PPOConfig(model={"hidden": [32]})``, ``--set model.use_lstm=true``),
    its keys are applied on top of the algorithm's default model and checked as
    ``ModelConfig``'s fields; `to_dict` writes all of them."""

    policies: dict[str, PolicySpec] = field(default_factory=dict)
    """Multi-agent: policy id -> `PolicySpec` (a plain dict with its fields works too).
    Empty: one policy, ``"default_policy"``, acts for every agent."""
    policy_mapping_fn: Callable[..., str] | None = None
    """Multi-agent: agent id -> policy id (or ``"module:function"``), asked once per agent and
    episode. A function of two arguments also gets the episode
    (`rlflow.config.self_play.EpisodeInfo`: its id and the env's agents), to map by episode.
    Must be picklable to reach remote workers. None: every agent to the only policy (allowed
    with at most one entry in ``policies``)."""
    policies_to_train: list[str] | None = None
    """Ids of the policies that learn (the others only act); None: all of them (with
    ``self_play``: all but the snapshots, which never train)."""
    self_play: SelfPlay | None = None
    """Self-play for games (`rlflow.config.self_play.SelfPlay`): ``snapshot_every`` (iterations
    between snapshots, required), ``pool_size`` (5), ``opponent_sampling`` (``"uniform"`` or
    ``"latest"``), ``policies`` (the learning ones; default the trained ones),
    ``evaluation_interval`` (default: at each snapshot) and ``evaluation_games`` (100). Each
    learning policy plays one seat per episode against frozen snapshots of itself; results get
    ``self_play/<policy>/...`` win rates against a uniformly random legal player and the newest
    snapshot. None: off. Given as a dict (a YAML ``self_play:`` block, ``--set
    self_play.snapshot_every=10``), checked into a `SelfPlay`; ``{}``: off."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "model", self._model_checked())
        object.__setattr__(self, "self_play", self._self_play_checked())
        self._check_multi_agent()
        self._check_elastic()

    def _model_checked(self) -> ModelConfig:
        """``model`` as a `ModelConfig`: kept when it is one; a dict's keys applied on top of
        this class's default model, errors naming ``<Class>.model.<field>``."""
        if isinstance(self.model, ModelConfig):
            return self.model
        default = type(self).field_default("model")
        return ModelConfig.from_dict(self.model, self._label("model"), base=default)

    def _self_play_checked(self) -> SelfPlay | None:
        """``self_play`` as a `SelfPlay` or None: a dict checked into one (``{}``: off)."""
        value = self.self_play
        if value is None or isinstance(value, SelfPlay):
            return value
        if isinstance(value, Mapping) and not value:
            return None
        return SelfPlay.from_dict(value, self._label("self_play"))

    # ----------------------------------------------------------------------- validation
    def _check_elastic(self) -> None:
        """An elastic run's workers have no placement group: the strict strategies, which
        only a group keeps, are refused."""
        if self.elastic() and self.placement_strategy.startswith("STRICT_"):
            raise ConfigError(
                f"{type(self).__name__}: min_workers={self.min_workers} < num_workers="
                f"{self.num_workers} starts workers one by one, without a placement group, so "
                f"placement_strategy={self.placement_strategy!r} cannot be kept: use 'PACK' or "
                "'SPREAD', or leave min_workers unset"
            )

    def _check_multi_agent(self) -> None:
        specs = self._policy_specs_checked()
        object.__setattr__(self, "policies", specs)
        self._check_mapping_fn()
        if self.policies_to_train is not None:
            known = self.policy_ids()
            bad = [p for p in self.policies_to_train if p not in known]
            if isinstance(self.policies_to_train, str) or bad:
                raise self._bad("policies_to_train", f"must be a list of policy ids from {known}")
        self._check_self_play()

    def _check_self_play(self) -> None:
        """With ``self_play`` on, the trained policies are named (no snapshot)."""
        settings = self.self_play
        if settings is None:
            return
        base = self.base_policy_ids()
        trained = [p for p in (self.policies_to_train or base) if p in base]
        if self.policies_to_train is not None and len(trained) < len(self.policies_to_train):
            raise self._bad(
                "policies_to_train", "names a self-play snapshot; snapshots never train"
            )
        unknown = [p for p in settings.policies if p not in base]
        if unknown:
            raise self._bad("self_play", f"names policies {unknown}, not among {base}")
        object.__setattr__(self, "policies_to_train", trained)

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

    def _check_mapping_fn(self) -> None:
        """Import a ``"module:function"`` mapping fn; one is needed with several policies."""
        fn = self.policy_mapping_fn
        if isinstance(fn, str):
            fn = import_object(fn, f"{type(self).__name__}.policy_mapping_fn")
            object.__setattr__(self, "policy_mapping_fn", fn)
        if fn is not None and not callable(fn):
            raise self._bad("policy_mapping_fn", "must be a function agent_id -> policy_id")
        if fn is None and len(self.base_policy_ids()) > 1:
            raise self._bad(
                "policy_mapping_fn",
                f"must be given with more than one policy ({sorted(self.base_policy_ids())}): it "
                "maps each agent id to a policy id",
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

    def base_policy_ids(self) -> list[str]:
        """The ids of the run's own policies: the keys of `policies`, or
        ``["default_policy"]`` (an algorithm with policies of its own overrides this)."""
        return list(self.policies) or [DEFAULT_POLICY_ID]

    def base_policy_specs(self) -> dict[str, PolicySpec]:
        """`policies`, or one default `PolicySpec` under ``"default_policy"`` when empty (an
        algorithm with policies of its own overrides this)."""
        return dict(self.policies) or {DEFAULT_POLICY_ID: PolicySpec()}

    def policy_ids(self) -> list[str]:
        """The ids of every policy of the run: `base_policy_ids`, then each self-play
        learner's snapshot pool."""
        settings = self.self_play
        if settings is None:
            return self.base_policy_ids()
        pools = [s for p in self._learners(settings) for s in settings.snapshot_ids(p)]
        return self.base_policy_ids() + pools

    def policy_specs(self) -> dict[str, PolicySpec]:
        """Every policy's `PolicySpec`: `base_policy_specs`, then the self-play snapshots, each
        its learner's spec with ``snapshot_of`` set."""
        specs = self.base_policy_specs()
        settings = self.self_play
        if settings is not None:
            for learner in self._learners(settings):
                copy = dataclasses.replace(specs[learner], snapshot_of=learner)
                specs.update({s: copy for s in settings.snapshot_ids(learner)})
        return specs

    def self_play_learners(self) -> tuple[str, ...]:
        """The policies that learn by self-play (none when ``self_play`` is off)."""
        settings = self.self_play
        return () if settings is None else self._learners(settings)

    def _learners(self, settings: SelfPlay) -> tuple[str, ...]:
        base = self.base_policy_ids()
        return settings.learners([p for p in (self.policies_to_train or base) if p in base])

    def agent_mapping(self) -> Callable[..., str] | None:
        """The mapping the workers use: ``policy_mapping_fn``, or with ``self_play`` the
        per-episode `SelfPlayMapping` (which answers ``policy_mapping_fn`` when asked about
        an agent outside an episode)."""
        settings = self.self_play
        if settings is None:
            return self.policy_mapping_fn
        seed = 0 if self.seed is None else self.seed
        return SelfPlayMapping(self._learners(settings), settings, seed, self.policy_mapping_fn)

    # ------------------------------------------------------------------------ building
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
        """All fields as a plain dict, which `from_dict` builds this config from again: ``model``
        as a dict of all its fields, ``self_play`` as one (or None: off)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["model"] = self.model.to_dict()
        out["self_play"] = None if self.self_play is None else self.self_play.to_dict()
        return out

    def model_overrides(self) -> dict[str, Any]:
        """The ``model`` fields that differ from this class's default model, as a dict: how a
        config of another class takes this one's model, on top of its own default as it takes a
        user's dict (`PolicySpec.policy_config`, `rlflow.setup`; a DQN policy in a PPO run
        keeps DQN's relu network), and how ``ppo_dqn`` writes its learners' (as overrides)."""
        default = type(self).field_default("model").to_dict()
        return {k: v for k, v in self.model.to_dict().items() if v != default[k]}


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

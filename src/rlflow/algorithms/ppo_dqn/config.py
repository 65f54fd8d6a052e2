"""`PPODQNConfig`: one multi-agent run where some agents learn with PPO and others with DQN.

`AlgorithmConfig`'s fields (how the run collects experience) plus ``ppo`` and ``dqn``, each
learner's whole typed config (`PPOConfig`, `DQNConfig`), and ``train_weights``. Defaults:
`AlgorithmConfig`'s, with the run's own in the class statement below (a two-agent CartPole,
sampling on the learner, iterations of at least 1 s: a train item is one learner's step);
each learner's are its config class's (their reporting fields are unused: the run's report).
The run's collection fields (`COLLECTION_FIELDS`) are the learners' too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.algorithms.ppo.config import PPOConfig
from rlflow.config import AlgorithmConfig, PolicySpec
from rlflow.errors import ConfigError

__all__ = ["COLLECTION_FIELDS", "DQN_POLICY", "PPODQNConfig", "PPO_POLICY", "ppo_dqn_mapping"]

PPO_POLICY = "ppo_policy"
"""Id of the policy trained with PPO."""
DQN_POLICY = "dqn_policy"
"""Id of the policy trained with DQN."""

COLLECTION_FIELDS = (
    "env",
    "env_config",
    "num_workers",
    "num_envs_per_worker",
    "rollout_fragment_length",
    "seed",
    "num_torch_threads",
)
"""The fields the learners' configs take from the run's: how experience is collected and
seeded (one worker set serves both)."""

L = TypeVar("L", bound=AlgorithmConfig)


def ppo_dqn_mapping(agent_id: str) -> str:
    """Agents whose id ends in an even number act with `PPO_POLICY`, odd ones with `DQN_POLICY`.

    >>> [ppo_dqn_mapping(a) for a in ("agent_0", "agent_1", "agent_2")]
    ['ppo_policy', 'dqn_policy', 'ppo_policy']
    """
    match = re.search(r"(\d+)$", agent_id)
    if match is None:
        raise ConfigError(
            f"ppo_dqn_mapping: agent id {agent_id!r} does not end in a number; give a "
            "policy_mapping_fn that maps this env's agents to 'ppo_policy' / 'dqn_policy'"
        )
    return PPO_POLICY if int(match.group(1)) % 2 == 0 else DQN_POLICY


@dataclass(frozen=True, kw_only=True)
class PPODQNConfig(
    AlgorithmConfig,
    defaults={
        "env": "multi_cartpole",
        "num_workers": 0,
        "num_envs_per_worker": 4,
        "rollout_fragment_length": 32,
        "policy_mapping_fn": ppo_dqn_mapping,
        "min_time_s_per_iteration": 1.0,
    },
):
    """PPO for the agents mapped to ``ppo_policy``, DQN for those mapped to ``dqn_policy``.

    The run's fields say how experience is collected (env, workers, fragments, seed); ``ppo``
    and ``dqn`` are each learner's own settings (``lr``, ``train_batch_size``,
    ``num_sgd_iter``, ``buffer_size``, ``learning_starts``, ``target_network_update_freq``,
    ``training_intensity``, epsilon schedule, ...). The policies are these two
    (`base_policy_specs`; with ``self_play``, each also gets its snapshot pool); ``policies``
    stays empty.
    """

    ppo: PPOConfig = field(default_factory=PPOConfig)
    """The PPO learner's config, for ``ppo_policy``. Given as a dict (a YAML file's ``ppo:``
    section, ``Trainer("ppo_dqn", ppo={...})``), it holds overrides of `PPOConfig`'s defaults,
    checked like that config's keys; a `COLLECTION_FIELDS` key there is an error (set it on the
    run). Given as a `PPOConfig`, its `COLLECTION_FIELDS` are replaced by the run's."""
    dqn: DQNConfig = field(default_factory=DQNConfig)
    """The DQN learner's config, for ``dqn_policy``: as ``ppo``, with `DQNConfig`."""
    train_weights: list[float] | None = None
    """``[ppo, dqn]``: train steps of each per round (``concurrently`` round robin, e.g.
    ``[1, 4]``); None: both branches run asynchronously, each as its input is ready."""

    def __post_init__(self) -> None:
        if self.policies:
            raise self._bad("policies", "is built from the ppo and dqn fields; leave it empty")
        # The learners' configs first: the checks of the run's config below read policy_specs.
        object.__setattr__(self, "ppo", self._learner_config("ppo", PPOConfig))
        object.__setattr__(self, "dqn", self._learner_config("dqn", DQNConfig))
        super().__post_init__()
        if self.train_weights is not None:
            weights = list(self.train_weights)
            if len(weights) != 2 or not all(
                isinstance(w, int | float) and not isinstance(w, bool) and w > 0 for w in weights
            ):
                raise self._bad("train_weights", "must be None or [ppo, dqn], two numbers > 0")

    def _learner_config(self, name: str, cls: type[L]) -> L:
        """Field ``name`` as a ``cls`` with the run's collection fields (from a dict of overrides
        of ``cls``'s defaults, or from a ``cls`` whose collection fields are replaced)."""
        value = getattr(self, name)
        if not isinstance(value, (dict, cls)):
            raise self._bad(name, f"must be a dict of config overrides or a {cls.__name__}")
        if isinstance(value, dict) and (bad := sorted(set(value) & set(COLLECTION_FIELDS))):
            raise self._bad(name, f"sets {bad}; set them on the run's config instead")
        collection = {k: getattr(self, k) for k in COLLECTION_FIELDS}
        try:
            if isinstance(value, dict):
                return cls.from_dict({**collection, **value})
            changed = {k: v for k, v in collection.items() if getattr(value, k) != v}
            return value.replace(**changed) if changed else value
        except ConfigError as err:
            raise ConfigError(f"{type(self).__name__}.{name}: {err}") from None

    def base_policy_ids(self) -> list[str]:
        """``["ppo_policy", "dqn_policy"]``."""
        return [PPO_POLICY, DQN_POLICY]

    def base_policy_specs(self) -> dict[str, PolicySpec]:
        """`PPOPolicy` with ``ppo`` for ``ppo_policy``, `DQNPolicy` with ``dqn`` for
        ``dqn_policy``. (The policies are imported here, not with the config: they import
        torch, which checking a config does not need.)"""
        from rlflow.algorithms.dqn.policy import DQNPolicy
        from rlflow.algorithms.ppo.policy import PPOPolicy

        return {
            PPO_POLICY: PolicySpec(policy_class=PPOPolicy, config=self.ppo),
            DQN_POLICY: PolicySpec(policy_class=DQNPolicy, config=self.dqn),
        }

    def to_dict(self) -> dict[str, Any]:
        """All fields; ``ppo`` and ``dqn`` as dicts of the fields that differ from their config
        class's defaults, collection fields left out (the shape a YAML file gives them), so
        `from_dict` rebuilds this config from it."""
        out = super().to_dict()
        out["ppo"], out["dqn"] = _overrides(self.ppo), _overrides(self.dqn)
        return out


def _overrides(config: AlgorithmConfig) -> dict[str, Any]:
    """The fields of ``config`` that differ from its class's defaults, but the collection
    fields, as `AlgorithmConfig.to_dict` writes them (the model as its fields that differ)."""
    values = {**config.to_dict(), "model": config.model_overrides()}
    return {
        name: values[name]
        for name in config.field_names()
        if name not in COLLECTION_FIELDS and getattr(config, name) != config.field_default(name)
    }

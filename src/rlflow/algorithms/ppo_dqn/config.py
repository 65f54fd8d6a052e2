"""`PPODQNConfig`: one multi-agent run where some agents learn with PPO and others with DQN."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.algorithms.dqn.policy import DQNPolicy
from rlflow.algorithms.ppo.config import PPOConfig
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.config import AlgorithmConfig, PolicySpec
from rlflow.errors import ConfigError

__all__ = ["DQN_POLICY", "PPODQNConfig", "PPO_POLICY", "ppo_dqn_mapping"]

PPO_POLICY = "ppo_policy"
"""Id of the policy trained with PPO."""
DQN_POLICY = "dqn_policy"
"""Id of the policy trained with DQN."""

# Fields a sub-config takes from the run's config: how experience is collected and seeded.
_SHARED = (
    "env",
    "env_config",
    "num_workers",
    "num_envs_per_worker",
    "rollout_fragment_length",
    "seed",
    "num_torch_threads",
)


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
class PPODQNConfig(AlgorithmConfig):
    """PPO for the agents mapped to ``ppo_policy``, DQN for those mapped to ``dqn_policy``.

    The run's fields say how experience is collected (env, workers, fragments, seed); ``ppo``
    and ``dqn`` hold each learner's own settings as overrides of `PPOConfig` / `DQNConfig`
    (``lr``, ``train_batch_size``, ``num_sgd_iter``, ``buffer_size``, ``learning_starts``,
    ``target_network_update_freq``, ``training_intensity``, epsilon schedule, ...), checked
    like those configs. `policies` is (re)built from them: leave it empty.
    """

    env: Any = "multi_cartpole"
    """A multi-agent env (default: two independent CartPoles)."""
    num_workers: int = 0
    """Remote rollout workers, >= 0 (0: the learner samples)."""
    num_envs_per_worker: int = 4
    """Multi-agent envs stepped together in each worker, >= 1."""
    rollout_fragment_length: int = 32
    """Env steps per env in one ``sample()``, >= 1."""
    policy_mapping_fn: Any = ppo_dqn_mapping
    """Agent id -> ``"ppo_policy"`` or ``"dqn_policy"`` (default: `ppo_dqn_mapping`)."""
    ppo: dict[str, Any] = field(default_factory=dict)
    """Overrides of `PPOConfig` for ``ppo_policy``."""
    dqn: dict[str, Any] = field(default_factory=dict)
    """Overrides of `DQNConfig` for ``dqn_policy``."""
    train_weights: list[float] | None = None
    """``[ppo, dqn]``: train steps of each per round (``concurrently`` round robin, e.g.
    ``[1, 4]``); None: both branches run asynchronously, each as its input is ready."""

    def __post_init__(self) -> None:
        if self.policies and set(self.policies) != {PPO_POLICY, DQN_POLICY}:
            raise self._bad("policies", "is built from the ppo and dqn fields; leave it empty")
        for name in ("ppo", "dqn"):
            if not isinstance(getattr(self, name), dict):
                raise self._bad(name, "must be a dict of config overrides")
        shared = {k: getattr(self, k) for k in _SHARED}
        for name, cls in (("ppo", PPOConfig), ("dqn", DQNConfig)):
            bad = sorted(set(getattr(self, name)) & set(_SHARED))
            if bad:
                raise self._bad(name, f"sets {bad}; set them on the run's config instead")
            try:
                cls.from_dict({**shared, **getattr(self, name)})
            except ConfigError as err:
                raise ConfigError(f"{type(self).__name__}.{name}: {err}") from None
        specs = {
            PPO_POLICY: PolicySpec(policy_class=PPOPolicy, config=self.ppo_config()),
            DQN_POLICY: PolicySpec(policy_class=DQNPolicy, config=self.dqn_config()),
        }
        object.__setattr__(self, "policies", specs)
        super().__post_init__()
        if self.train_weights is not None:
            weights = list(self.train_weights)
            if len(weights) != 2 or not all(
                isinstance(w, int | float) and not isinstance(w, bool) and w > 0 for w in weights
            ):
                raise self._bad("train_weights", "must be None or [ppo, dqn], two numbers > 0")

    def ppo_config(self) -> PPOConfig:
        """The PPO learner's settings (the run's collection fields, then ``ppo``)."""
        return PPOConfig.from_dict({**{k: getattr(self, k) for k in _SHARED}, **self.ppo})

    def dqn_config(self) -> DQNConfig:
        """The DQN learner's settings (the run's collection fields, then ``dqn``)."""
        return DQNConfig.from_dict({**{k: getattr(self, k) for k in _SHARED}, **self.dqn})

    def to_dict(self) -> dict[str, Any]:
        """All fields except the derived `policies` (rebuilt from ``ppo`` and ``dqn``)."""
        out = super().to_dict()
        out["policies"] = {}
        return out

"""Configs: one frozen, keyword-only dataclass per algorithm, built from field groups.

Every field is declared, with its one docstring, in one field group: a small frozen dataclass
that checks only its own fields (`rlflow.config.group.FieldGroup`). :class:`AlgorithmConfig`
(`rlflow.config.algorithm`) is built from the groups every algorithm has; each algorithm's
config (``rlflow.algorithms.<name>.config``) adds the groups it shares with other families
(`rlflow.config.learning`), its family's fields (``q_learning``'s replay, ``twin_q``'s) and its
own, and sets its defaults in one place, its class statement: ``class PPOConfig(...,
defaults={"lr": 3e-4, ...})``. A multi-agent run names its policies with :class:`PolicySpec`.
The modules of this package:

- `rlflow.config.group`: `FieldGroup`, the base of groups and configs (``defaults=``), and
  `NestedGroup`, a group a config holds whole in one field;
- `rlflow.config.algorithm`: `AlgorithmConfig`, `PolicySpec`, `resolve_policies`;
- `rlflow.config.rollouts` (`RolloutConfig`): the env, its wrappers, observation filter and
  vector engine, the workers, fragments and seed;
- `rlflow.config.training` (`TrainingConfig`): train batch, gamma, lr, gradient clipping;
- `rlflow.config.model` (`ModelConfig`): the policy's network, a config's ``model`` (custom
  models included);
- `rlflow.config.self_play` (`SelfPlay`): a config's ``self_play``, and the per-episode
  mapping of a self-play run;
- `rlflow.config.reporting` (`ReportingConfig`), `rlflow.config.resources`
  (`ResourceConfig`), `rlflow.config.failures` (`FailureConfig`): where results go and
  evaluation, resources and placement, what a run does when parts fail;
- `rlflow.config.offline` (`OfflineConfig`): recorded experience, written (``output``) and
  read (``input``);
- `rlflow.config.learning`: what several families learn with (`ActorCriticConfig`,
  `LossWeightsConfig`, `SGDConfig`, `SurrogateConfig`, `AdaptiveKLConfig`,
  `TargetNetworkConfig`, `LearnerQueueConfig`);
- `rlflow.config.files`: config files and the tuned configs the algorithms ship.
"""

from rlflow.config.algorithm import (
    DEFAULT_POLICY_ID,
    AlgorithmConfig,
    PolicySpec,
    policy_config_class,
    resolve_policies,
)
from rlflow.config.group import FieldGroup
from rlflow.config.learning import ActorCriticConfig

__all__ = [
    "DEFAULT_POLICY_ID",
    "ActorCriticConfig",
    "AlgorithmConfig",
    "FieldGroup",
    "PolicySpec",
    "policy_config_class",
    "resolve_policies",
]

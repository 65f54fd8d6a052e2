"""Configs: one frozen, keyword-only dataclass per algorithm, built from shared field groups.

:class:`AlgorithmConfig` (`rlflow.config.algorithm`) holds the fields every algorithm has;
each algorithm's config (``rlflow.algorithms.<name>.config``) extends it. A multi-agent run
names its policies with :class:`PolicySpec`. The modules of this package:

- `rlflow.config.algorithm`: `AlgorithmConfig`, `ActorCriticConfig`, `PolicySpec`,
  `resolve_policies`;
- `rlflow.config.rollouts`: env wrappers, observation filters, evaluation, env engines;
- `rlflow.config.resources`, `rlflow.config.failures`, `rlflow.config.reporting`: resources
  and placement, what a run does when parts fail, where results go;
- `rlflow.config.model`: the ``model`` dict (custom models included);
- `rlflow.config.files`: config files and the tuned configs the algorithms ship.
"""

from rlflow.config.algorithm import (
    DEFAULT_POLICY_ID,
    ActorCriticConfig,
    AlgorithmConfig,
    PolicySpec,
    policy_config_class,
    resolve_policies,
)

__all__ = [
    "DEFAULT_POLICY_ID",
    "ActorCriticConfig",
    "AlgorithmConfig",
    "PolicySpec",
    "policy_config_class",
    "resolve_policies",
]

"""Algorithms, one package each (``config.py``, ``policy.py``, ``plan.py``, ``tuned/<env>.yaml``).

A package never imports another algorithm's package, with two documented kinds of exception:
a variant's config extends its base algorithm's config (a2c and a3c of pg, apex of dqn, appo
of impala), and ``ppo_dqn``, which composes PPO and DQN, imports their config and policy
classes. A variant that shares a policy (a2c and a3c use pg's `PGPolicy`, apex uses dqn's
`DQNPolicy`) gets it here, from this registry, never by import; a loss two algorithms extend
(IMPALA's and APPO's V-trace) keeps its base in `rlflow.policy`.

Where to start: a plan (e.g. :func:`rlflow.algorithms.ppo.ppo_plan`) is a short function from a
:class:`~rlflow.workers.WorkerSet` and a config to an iterator of result dicts. The registry
:data:`ALGORITHMS` names each algorithm's config class, policy class and plan::

    spec = get_algorithm("ppo")
    config = spec.config_cls(num_workers=2)
    workers = WorkerSet(config, spec.policy_cls)
    results = spec.plan(workers, config)
    print(next(results)["episode_return_mean"])
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, NamedTuple

from rlflow.algorithms.a2c import A2CConfig, a2c_plan
from rlflow.algorithms.a3c import A3CConfig, a3c_plan
from rlflow.algorithms.apex import ApexConfig, apex_plan
from rlflow.algorithms.appo import APPOConfig, APPOPolicy, appo_plan
from rlflow.algorithms.dqn import DQNConfig, DQNPolicy, dqn_plan
from rlflow.algorithms.impala import IMPALAConfig, VTracePolicy, impala_plan
from rlflow.algorithms.maml import MAMLConfig, MAMLPolicy, maml_plan
from rlflow.algorithms.pg import PGConfig, PGPolicy, pg_plan
from rlflow.algorithms.ppo import PPOConfig, PPOPolicy, ppo_plan
from rlflow.algorithms.ppo_dqn import PPODQNConfig, ppo_dqn_plan
from rlflow.algorithms.sac import SACConfig, SACPolicy, sac_plan
from rlflow.algorithms.td3 import TD3Config, TD3Policy, td3_plan
from rlflow.config import AlgorithmConfig
from rlflow.config.files import load_tuned_config
from rlflow.errors import ConfigError
from rlflow.policy import TorchPolicy

__all__ = [
    "ALGORITHMS",
    "A2CConfig",
    "A3CConfig",
    "APPOConfig",
    "AlgorithmSpec",
    "ApexConfig",
    "DQNConfig",
    "IMPALAConfig",
    "MAMLConfig",
    "PGConfig",
    "PPOConfig",
    "PPODQNConfig",
    "SACConfig",
    "TD3Config",
    "get_algorithm",
    "tuned_config",
]


class AlgorithmSpec(NamedTuple):
    """What a trainer needs to run an algorithm."""

    name: str
    """Registry key (lower case)."""
    config_cls: type[AlgorithmConfig]
    """The config dataclass."""
    policy_cls: type[TorchPolicy]
    """The policy class every rollout worker builds."""
    plan: Callable[[Any, Any], Any]
    """``plan(workers, config) -> LocalIterator[dict]``."""
    summary: str
    """One line for listings."""


ALGORITHMS: dict[str, AlgorithmSpec] = {
    "pg": AlgorithmSpec(
        "pg", PGConfig, PGPolicy, pg_plan, "Vanilla policy gradient (REINFORCE), synchronous"
    ),
    "a2c": AlgorithmSpec(
        "a2c", A2CConfig, PGPolicy, a2c_plan, "Synchronous advantage actor-critic"
    ),
    "a3c": AlgorithmSpec(
        "a3c", A3CConfig, PGPolicy, a3c_plan, "Asynchronous advantage actor-critic"
    ),
    "ppo": AlgorithmSpec(
        "ppo", PPOConfig, PPOPolicy, ppo_plan, "Proximal policy optimization (clip + KL)"
    ),
    "dqn": AlgorithmSpec(
        "dqn", DQNConfig, DQNPolicy, dqn_plan, "Deep Q-learning (double, dueling, n-step, PER)"
    ),
    "apex": AlgorithmSpec(
        "apex", ApexConfig, DQNPolicy, apex_plan, "Ape-X: distributed prioritized replay DQN"
    ),
    "impala": AlgorithmSpec(
        "impala", IMPALAConfig, VTracePolicy, impala_plan, "IMPALA: async actor-learner, V-trace"
    ),
    "appo": AlgorithmSpec(
        "appo", APPOConfig, APPOPolicy, appo_plan, "Asynchronous PPO on IMPALA's dataflow"
    ),
    "maml": AlgorithmSpec(
        "maml", MAMLConfig, MAMLPolicy, maml_plan, "MAML: meta-learning, one task per worker"
    ),
    "ppo_dqn": AlgorithmSpec(
        "ppo_dqn",
        PPODQNConfig,
        PPOPolicy,
        ppo_dqn_plan,
        "Multi-agent: PPO for some agents, DQN for others, one plan",
    ),
    "sac": AlgorithmSpec(
        "sac", SACConfig, SACPolicy, sac_plan, "Soft actor-critic (twin Q, entropy tuning); Box"
    ),
    "td3": AlgorithmSpec(
        "td3", TD3Config, TD3Policy, td3_plan, "TD3: twin critics, smoothing, delayed actor; Box"
    ),
}
"""Every built-in algorithm by name."""


def get_algorithm(name: str) -> AlgorithmSpec:
    """The spec of algorithm ``name`` (case-insensitive); ConfigError naming the known ones."""
    key = name.lower() if isinstance(name, str) else name
    spec = ALGORITHMS.get(key)
    if spec is None:
        close = difflib.get_close_matches(str(key), list(ALGORITHMS), n=1, cutoff=0.3)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"unknown algorithm {name!r}; known algorithms are {sorted(ALGORITHMS)}{hint}"
        )
    return spec


def tuned_config(
    name: str, env_id: str, *, hardware: str = "cpu", **overrides: Any
) -> AlgorithmConfig:
    """The shipped tuned config of algorithm ``name`` for ``env_id``, with ``overrides``.

    Reads ``rlflow/algorithms/<name>/tuned/<env_id>.yaml``, where each "/" of a namespaced id
    is written "-" (``ALE/Pong-v5`` -> ``ALE-Pong-v5.yaml``), with `rlflow.config.files`'s
    loader (the one the command line uses); ``hardware="gpu"`` reads ``tuned/gpu/<env_id>.yaml``
    (sized for a GPU learner, `rlflow.config.files.TUNED_HARDWARE`). ConfigError naming the
    available envs if there is none.
    """
    spec = get_algorithm(name)
    return load_tuned_config(spec.name, spec.config_cls, env_id, overrides, hardware)

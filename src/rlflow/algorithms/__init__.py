"""Algorithms, one package each (``config.py``, ``policy.py``, ``plan.py``, ``tuned/<env>.yaml``).

A package never imports another algorithm's package, with two documented kinds of exception: a
variant's config extends its base algorithm's config (a2c and a3c of pg, apex of dqn, appo of
impala, bc of marwil, cql of sac (whose policy it extends), apex_r2d2 of r2d2 and apex, whose
plan it runs, ddppo of ppo, apex_td3 of td3 (whose policy it extends) and apex, whose plan it
runs, apex_ddpg of apex_td3, whose plan it runs, mappo of ppo (whose policy it extends and whose
plan it runs), qmix of dqn (whose policy it extends and whose plan it runs), vdn of qmix, whose
plan it runs, matd3 of maddpg, whose policy and plan it extends), and
``ppo_dqn``, which composes PPO and DQN, imports their config and policy classes. A variant
that shares a policy (a2c and a3c use pg's `PGPolicy`, ddppo ppo's `PPOPolicy`, apex uses
dqn's `DQNPolicy`, apex_r2d2 r2d2's `R2D2Policy`, apex_ddpg apex_td3's `ApexTD3Policy`, bc
marwil's `MARWILPolicy`, vdn qmix's `QMIXPolicy`) gets it here, from this registry, never by
import; a loss two algorithms extend (IMPALA's and APPO's V-trace) keeps its base in
`rlflow.policy`.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlflow.algorithms.a2c import A2CConfig
from rlflow.algorithms.a3c import A3CConfig
from rlflow.algorithms.alpha_zero import AlphaZeroConfig
from rlflow.algorithms.apex import ApexConfig
from rlflow.algorithms.apex_ddpg import ApexDDPGConfig
from rlflow.algorithms.apex_r2d2 import ApexR2D2Config
from rlflow.algorithms.apex_td3 import ApexTD3Config
from rlflow.algorithms.appo import APPOConfig
from rlflow.algorithms.ars import ARSConfig
from rlflow.algorithms.bc import BCConfig
from rlflow.algorithms.cql import CQLConfig
from rlflow.algorithms.ddppo import DDPPOConfig
from rlflow.algorithms.dqn import DQNConfig
from rlflow.algorithms.dreamerv3 import DreamerV3Config
from rlflow.algorithms.es import ESConfig
from rlflow.algorithms.impala import IMPALAConfig
from rlflow.algorithms.maddpg import MADDPGConfig
from rlflow.algorithms.maml import MAMLConfig
from rlflow.algorithms.mappo import MAPPOConfig
from rlflow.algorithms.marwil import MARWILConfig
from rlflow.algorithms.matd3 import MATD3Config
from rlflow.algorithms.pg import PGConfig
from rlflow.algorithms.ppo import PPOConfig
from rlflow.algorithms.ppo_dqn import PPODQNConfig
from rlflow.algorithms.qmix import QMIXConfig
from rlflow.algorithms.r2d2 import R2D2Config
from rlflow.algorithms.sac import SACConfig
from rlflow.algorithms.td3 import TD3Config
from rlflow.algorithms.vdn import VDNConfig
from rlflow.config import AlgorithmConfig
from rlflow.config.files import load_tuned_config
from rlflow.errors import ConfigError
from rlflow.lazy import resolve_ref

if TYPE_CHECKING:
    from rlflow.policy import TorchPolicy

__all__ = [
    "ALGORITHMS",
    "A2CConfig",
    "A3CConfig",
    "APPOConfig",
    "ARSConfig",
    "AlphaZeroConfig",
    "AlgorithmSpec",
    "BCConfig",
    "CQLConfig",
    "DDPPOConfig",
    "ApexConfig",
    "ApexDDPGConfig",
    "ApexR2D2Config",
    "ApexTD3Config",
    "DQNConfig",
    "DreamerV3Config",
    "ESConfig",
    "IMPALAConfig",
    "MADDPGConfig",
    "MAMLConfig",
    "MARWILConfig",
    "MATD3Config",
    "PGConfig",
    "PPOConfig",
    "PPODQNConfig",
    "SACConfig",
    "TD3Config",
    "get_algorithm",
    "tuned_config",
]


@dataclass(frozen=True)
class AlgorithmSpec:
    """What a trainer needs to run an algorithm.

    ``policy_cls`` and ``plan`` may be given as ``"module:attribute"`` strings: they are
    imported on first use (both import torch), so looking an algorithm up and checking its
    config stays light (`rlflow.lazy`).
    """

    name: str
    """Registry key (lower case)."""
    config_cls: type[AlgorithmConfig]
    """The config dataclass."""
    policy_ref: type[TorchPolicy] | str
    """The policy class, or where it is (``"module:Class"``)."""
    plan_ref: Callable[[Any, Any], Any] | str
    """The plan function, or where it is (``"module:function"``)."""
    summary: str
    """One line for listings."""
    reads_input: bool = False
    """Whether its plan reads recorded experience (``input``, ``input_mix``:
    `rlflow.ops.offline.experience`); a run of another algorithm naming recorded files is
    refused before anything starts."""

    @property
    def policy_cls(self) -> type[TorchPolicy]:
        """The policy class every rollout worker builds (imported on first use)."""
        policy: type[TorchPolicy] = resolve_ref(self.policy_ref)
        return policy

    @property
    def plan(self) -> Callable[[Any, Any], Any]:
        """``plan(workers, config) -> LocalIterator[dict]`` (imported on first use)."""
        plan: Callable[[Any, Any], Any] = resolve_ref(self.plan_ref)
        return plan


def _spec(
    name: str,
    config_cls: type[AlgorithmConfig],
    policy: str,
    summary: str,
    *,
    reads_input: bool = False,
) -> AlgorithmSpec:
    """The spec of algorithm ``name``: its policy ``policy`` (``"package:Class"`` under
    ``rlflow.algorithms``), its plan ``<name>_plan`` in its package."""
    package, _, cls = policy.partition(":")
    return AlgorithmSpec(
        name,
        config_cls,
        f"rlflow.algorithms.{package}.policy:{cls}",
        f"rlflow.algorithms.{name}.plan:{name}_plan",
        summary,
        reads_input,
    )


ALGORITHMS: dict[str, AlgorithmSpec] = {
    spec.name: spec
    for spec in (
        _spec("pg", PGConfig, "pg:PGPolicy", "Vanilla policy gradient (REINFORCE), synchronous"),
        _spec("a2c", A2CConfig, "pg:PGPolicy", "Synchronous advantage actor-critic"),
        _spec("a3c", A3CConfig, "pg:PGPolicy", "Asynchronous advantage actor-critic"),
        _spec("ppo", PPOConfig, "ppo:PPOPolicy", "Proximal policy optimization (clip + KL)"),
        _spec(
            "ddppo",
            DDPPOConfig,
            "ppo:PPOPolicy",
            "Decentralized distributed PPO: the workers learn, all-reducing gradients",
        ),
        _spec(
            "dqn",
            DQNConfig,
            "dqn:DQNPolicy",
            "Deep Q-learning (double, dueling, n-step, PER)",
            reads_input=True,
        ),
        _spec("apex", ApexConfig, "dqn:DQNPolicy", "Ape-X: distributed prioritized replay DQN"),
        _spec("r2d2", R2D2Config, "r2d2:R2D2Policy", "R2D2: recurrent replay DQN (LSTM, burn-in)"),
        _spec(
            "apex_r2d2",
            ApexR2D2Config,
            "r2d2:R2D2Policy",
            "R2D2 on Ape-X's dataflow: sharded sequence replay, learner thread",
        ),
        _spec(
            "qmix",
            QMIXConfig,
            "qmix:QMIXPolicy",
            "QMIX: recurrent agents, monotonic mixer on the global state; groups",
        ),
        _spec("vdn", VDNConfig, "qmix:QMIXPolicy", "VDN: QMIX with the sum mixer; groups"),
        _spec(
            "impala", IMPALAConfig, "impala:VTracePolicy", "IMPALA: async actor-learner, V-trace"
        ),
        _spec("appo", APPOConfig, "appo:APPOPolicy", "Asynchronous PPO on IMPALA's dataflow"),
        _spec("maml", MAMLConfig, "maml:MAMLPolicy", "MAML: meta-learning, one task per worker"),
        _spec(
            "mappo",
            MAPPOConfig,
            "mappo:MAPPOPolicy",
            "MAPPO: a team's PPO, decentralized actors, centralized critic (groups)",
        ),
        _spec(
            "ppo_dqn",
            PPODQNConfig,
            "ppo:PPOPolicy",
            "Multi-agent: PPO for some agents, DQN for others, one plan",
        ),
        _spec(
            "sac",
            SACConfig,
            "sac:SACPolicy",
            "Soft actor-critic (twin Q, entropy tuning); Box",
            reads_input=True,
        ),
        _spec(
            "td3",
            TD3Config,
            "td3:TD3Policy",
            "TD3: twin critics, smoothing, delayed actor; Box",
            reads_input=True,
        ),
        _spec(
            "apex_td3",
            ApexTD3Config,
            "apex_td3:ApexTD3Policy",
            "TD3 on Ape-X's dataflow: sharded replay, per-worker noise; Box",
        ),
        _spec(
            "apex_ddpg",
            ApexDDPGConfig,
            "apex_td3:ApexTD3Policy",
            "DDPG on Ape-X's dataflow (RLlib's APEX_DDPG); Box",
        ),
        _spec(
            "maddpg",
            MADDPGConfig,
            "maddpg:MADDPGPolicy",
            "MADDPG: per-member actors, centralized critics; a team (groups)",
        ),
        _spec(
            "matd3",
            MATD3Config,
            "matd3:MATD3Policy",
            "MATD3: MADDPG with twin critics, smoothing, delayed actors; a team (groups)",
        ),
        _spec(
            "cql",
            CQLConfig,
            "cql:CQLPolicy",
            "CQL: conservative Q-learning (SAC) offline",
            reads_input=True,
        ),
        _spec(
            "bc",
            BCConfig,
            "marwil:MARWILPolicy",
            "Behaviour cloning from recorded experience",
            reads_input=True,
        ),
        _spec(
            "marwil",
            MARWILConfig,
            "marwil:MARWILPolicy",
            "MARWIL: advantage-weighted imitation from recorded experience",
            reads_input=True,
        ),
        _spec(
            "alpha_zero",
            AlphaZeroConfig,
            "alpha_zero:AlphaZeroPolicy",
            "AlphaZero: self-play with batched PUCT search; two-player turn-based games",
        ),
        _spec(
            "dreamerv3",
            DreamerV3Config,
            "dreamerv3:DreamerV3Policy",
            "DreamerV3: world model (RSSM), actor-critic trained in imagination; replay ratio",
        ),
        _spec(
            "es",
            ESConfig,
            "es:ESPolicy",
            "Evolution strategies: antithetic noise by index, centered ranks, Adam; no gradients",
        ),
        _spec(
            "ars",
            ARSConfig,
            "ars:ARSPolicy",
            "Augmented random search (V2-t): linear policy, top-b directions, shared noise",
        ),
    )
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

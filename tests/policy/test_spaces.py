"""Spaces an algorithm cannot take: one ConfigError naming the algorithm, the env and the space,
raised by the Trainer before any actor or backend starts (rlflow.policy.spaces)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlflow import Trainer
from rlflow.algorithms import ALGORITHMS
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.algorithms.twin_q.policy import TwinQPolicy
from rlflow.envs.targets import DictTargetEnv, MultiDiscreteTargetEnv, TupleTargetEnv
from rlflow.errors import ConfigError
from rlflow.policy.spaces import ALGORITHMS_FOR_ACTIONS, check_policy_spaces

pytestmark = pytest.mark.timeout(60)


class _Env(gym.Env[Any, Any]):
    observation_space: Any = spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space: Any = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return self.observation_space.sample(), {}


class TextObs(_Env):
    observation_space = spaces.Text(5)


class DictWithText(_Env):
    observation_space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "name": spaces.Text(5)})


class SequenceObs(_Env):
    observation_space = spaces.Sequence(spaces.Discrete(3))


class GraphObs(_Env):
    observation_space = spaces.Graph(spaces.Box(-1, 1, (2,)), None)


class MultiBinaryActions(_Env):
    action_space = spaces.MultiBinary(2)


class UnboundedBoxActions(_Env):
    action_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)


MULTI = "MultiDiscrete([3 4])"
PENDULUM = "Box(-2.0, 2.0, (1,), float32)"
ON_POLICY = "pg, a2c, a3c, ppo, ddppo, impala, appo"
BOX_ALGOS = f"algorithms for Box actions: {ON_POLICY}, sac, td3, apex_td3, apex_ddpg, es, ars"
MD_ALGOS = f"algorithms for MultiDiscrete actions: {ON_POLICY}"
DISCRETE_ALGOS = (
    f"algorithms for Discrete actions: {ON_POLICY}, dqn, apex, r2d2, apex_r2d2, es, ars"
)

CASES = [
    ("dqn", MultiDiscreteTargetEnv, f"DQNPolicy takes Discrete action spaces, not {MULTI}; "
     f"{MD_ALGOS}"),
    ("apex", "Pendulum-v1", f"DQNPolicy takes Discrete action spaces, not {PENDULUM}; {BOX_ALGOS}"),
    ("dqn", "Pendulum-v1", f"its action space is {PENDULUM}"),
    ("sac", "CartPole-v1", f"SACPolicy takes Box action spaces, not Discrete(2); {DISCRETE_ALGOS}"),
    ("td3", DictTargetEnv, f"TD3Policy takes Box action spaces, not Discrete(3); {DISCRETE_ALGOS}"),
    ("td3", UnboundedBoxActions, "must be a 1-D Box with finite bounds for TD3"),
    ("impala", MultiBinaryActions, "VTracePolicy takes Discrete, MultiDiscrete or Box action "
     "spaces, not MultiBinary(2)"),
    ("ppo", TextObs, "PPOPolicy takes Box or Discrete observation spaces, not Text(1, 5"),
    ("appo", SequenceObs, "APPOPolicy takes Box or Discrete observation spaces, not Sequence("),
    ("ppo", DictWithText, "its part ['name'] is Text(1, 5, "),
    ("a2c", GraphObs, "PGPolicy takes Box or Discrete observation spaces, not Graph("),
]  # fmt: skip


@pytest.mark.parametrize(("algo", "env", "needle"), CASES)
def test_refused_before_any_actor_starts_naming_algorithm_env_and_space(
    monkeypatch: pytest.MonkeyPatch, algo: str, env: Any, needle: str
) -> None:
    def no_workers(*args: Any) -> None:
        raise AssertionError("workers or a backend were started")

    monkeypatch.setattr("rlflow.trainer._make_workers", no_workers)
    monkeypatch.setattr("rlflow.trainer.acquire_backend", no_workers)
    with pytest.raises(ConfigError) as info:
        Trainer(algo, env=env, num_workers=1, backend="ray")
    message = str(info.value)
    name = env if isinstance(env, str) else env.__name__
    assert f"algorithm {algo!r} cannot use env {name!r}" in message
    assert needle in message, message


TEAM = {"maddpg", "matd3"}  # a team's (groups), not an env's action space


def test_the_hint_lists_agree_with_the_registered_policies() -> None:
    for kind, algos in ALGORITHMS_FOR_ACTIONS.items():
        space_cls = getattr(spaces, kind)
        for algo in algos:
            policy_cls = ALGORITHMS[algo].policy_cls
            assert issubclass(space_cls, policy_cls.action_space_types), (algo, kind)
    listed = {a for algos in ALGORITHMS_FOR_ACTIONS.values() for a in algos}
    # Every algorithm a user can point at an env alone is suggested (a new one must be added);
    # team algorithms (mappo, qmix, vdn, maddpg, matd3) need groups, not an action space.
    excluded = {"bc", "marwil", "cql", "maml", "ppo_dqn", "mappo", "alpha_zero", "qmix", "vdn"}
    assert listed == set(ALGORITHMS) - excluded - set(TEAM)
    for algo in listed:
        for space_cls in ALGORITHMS[algo].policy_cls.action_space_types:
            assert algo in ALGORITHMS_FOR_ACTIONS[space_cls.__name__], (algo, space_cls)


def test_check_policy_spaces_directly() -> None:
    box = spaces.Box(-1.0, 1.0, (2,), np.float32)
    check_policy_spaces(PPOPolicy, box, spaces.MultiDiscrete([2, 2]))
    check_policy_spaces(PPOPolicy, spaces.Discrete(4), box)
    check_policy_spaces(TwinQPolicy, box, box)
    with pytest.raises(ConfigError, match=r"flat space \(rlflow.envs.flatten_space\)"):
        check_policy_spaces(PPOPolicy, spaces.Dict({"a": box}), spaces.Discrete(2))
    with pytest.raises(ConfigError, match=r"^TwinQPolicy takes Box observation spaces, not Disc"):
        check_policy_spaces(TwinQPolicy, spaces.Discrete(3), box)


def test_supported_structured_spaces_pass_the_check() -> None:
    from rlflow.algorithms import DQNConfig, IMPALAConfig, PPOConfig
    from rlflow.algorithms.dqn import DQNPolicy
    from rlflow.algorithms.impala import VTracePolicy
    from rlflow.setup import check_env

    check_env(PPOConfig(env=DictTargetEnv), PPOPolicy, algo="ppo")
    check_env(DQNConfig(env=TupleTargetEnv), DQNPolicy, algo="dqn")  # flattened: a Box
    check_env(IMPALAConfig(env=MultiDiscreteTargetEnv), VTracePolicy, algo="impala")

"""Algorithm registry, configs and plans (tiny runs on the local backend with CountingEnv)."""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

import pytest

from rlflow.algorithms import (
    ALGORITHMS,
    A2CConfig,
    PGConfig,
    PPOConfig,
    get_algorithm,
    tuned_config,
)
from rlflow.config.files import tuned_envs
from rlflow.errors import ConfigError
from rlflow.ops import keys
from rlflow.testing.envs import CountingEnv
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)

TINY: dict[str, Any] = {
    "env": CountingEnv,
    "env_config": {"episode_len": 3},
    "num_workers": 2,
    "num_envs_per_worker": 1,
    "rollout_fragment_length": 5,
    "model": {"hidden": (8,)},
    # Iterations end by steps alone: the 1 s floor of the replay and async algorithms' defaults
    # would make these plan checks wait on the clock.
    "min_time_s_per_iteration": 0.0,
}


def test_get_algorithm_suggests_the_closest_name() -> None:
    assert get_algorithm("PPO").name == "ppo"
    known = re.escape(str(sorted(ALGORITHMS)))
    with pytest.raises(ConfigError, match=rf"'ppp'.*{known}.*'ppo'"):
        get_algorithm("ppp")


def test_tuned_configs_load_for_every_algorithm() -> None:
    for name, spec in ALGORITHMS.items():
        envs = tuned_envs(name)
        assert envs, name
        for env_id in envs:
            config = tuned_config(name, env_id)
            assert isinstance(config, spec.config_cls) and config.env == env_id, (name, env_id)
    with pytest.raises(ConfigError, match="available"):
        tuned_config("ppo", "Pong-v5")


def test_config_validation_names_class_field_value_and_rule() -> None:
    with pytest.raises(
        ConfigError,
        match=r"PPOConfig.sgd_minibatch_size=512 must be <= "
        r"train_batch_size=256",
    ):
        PPOConfig(sgd_minibatch_size=512, train_batch_size=256)
    with pytest.raises(ConfigError, match=r"A2CConfig\.microbatch_size=0"):
        A2CConfig(microbatch_size=0)
    with pytest.raises(ConfigError, match=r"PGConfig\.use_gae"):
        PGConfig(use_gae=True)
    with pytest.raises(ConfigError, match=r"PPOConfig\.lambda_=2"):
        PPOConfig(lambda_=2)


# maml needs a task-settable env, ppo_dqn a multi-agent one, mappo a team of agents (groups),
# alpha_zero a turn-based game it can copy, the offline ones recorded experience: their own test
# files run them. The team algorithms qmix, vdn, maddpg and matd3 run on a grouped env (below).
OFFLINE = {"bc", "marwil", "cql"}
TEAM_ALGORITHMS = {"qmix", "vdn", "maddpg", "matd3"}
"""Algorithms of a team (``groups``): qmix and vdn run on the two-step game's team, maddpg and
matd3 on multi_cartpole's two poles grouped."""
SINGLE_AGENT_ALGORITHMS = sorted(
    set(ALGORITHMS) - {"maml", "ppo_dqn", "mappo", "alpha_zero"} - OFFLINE - TEAM_ALGORITHMS
)
BOX_ALGORITHMS = {"sac", "td3", "apex_td3", "apex_ddpg"}
"""Algorithms for Box actions only: they run CountingEnv(continuous=True)."""


@pytest.mark.parametrize("name", SINGLE_AGENT_ALGORITHMS)
def test_every_plan_runs_two_iterations(local_backend: None, name: str) -> None:
    spec = get_algorithm(name)
    extra: dict[str, Any] = {}
    if name == "ppo":
        extra = {"train_batch_size": 20, "sgd_minibatch_size": 10}
    if name == "ddppo":  # each worker's batch is its fragment
        extra = {"train_batch_size": 5, "sgd_minibatch_size": 5}
    if name in BOX_ALGORITHMS:
        extra = {"env_config": {"episode_len": 3, "continuous": True}, "learning_starts": 20}
    if name == "dreamerv3":  # its network is sized by model_size alone; small train steps
        extra = {"model": {}, "learning_starts": 5, "batch_size": 2, "batch_length": 4}
        extra.update(imagination_horizon=2, train_ratio=4.0)
    config = spec.config_cls(**{**TINY, **extra})
    workers = WorkerSet(config, spec.policy_cls)
    plan = spec.plan(workers, config)
    first, second = plan.take(2)
    assert second["num_env_steps_sampled"] > first["num_env_steps_sampled"] > 0
    assert second["num_env_steps_trained"] > 0
    assert second["episode_return_mean"] == 3.0


@pytest.mark.parametrize("name", sorted(TEAM_ALGORITHMS))
def test_every_team_plan_runs_two_iterations(local_backend: None, name: str) -> None:
    spec = get_algorithm(name)
    if name in ("qmix", "vdn"):
        config = spec.config_cls(
            env="two_step_game",
            groups={"team": ["agent_0", "agent_1"]},
            num_workers=2,
            rollout_fragment_length=4,
            replay_sequence_length=2,
            train_batch_size=4,
            learning_starts=4,
            min_steps_per_iteration=8,
            min_time_s_per_iteration=0.0,
            model={"hidden": (8,), "lstm_cell_size": 8},
        )
    else:
        config = spec.config_cls(
            **{
                **TINY,
                "env": "multi_cartpole",
                "env_config": {},
                "groups": {"team": ["agent_0", "agent_1"]},
                "learning_starts": 20,
                "train_batch_size": 16,
            }
        )
    workers = WorkerSet(config, spec.policy_cls)
    plan = spec.plan(workers, config)
    first, second = plan.take(2)
    assert second["num_env_steps_sampled"] > first["num_env_steps_sampled"] > 0
    assert second["num_env_steps_trained"] > 0
    if name in ("qmix", "vdn"):
        assert 0.0 <= second["episode_return_mean"] <= 8.0  # the game's payoffs
        assert second["episode_len_mean"] == 2.0


def test_a2c_microbatches_average_then_apply_once_per_train_batch(local_backend: None) -> None:
    config = A2CConfig(**TINY, train_batch_size=30, microbatch_size=10)
    workers = WorkerSet(config, get_algorithm("a2c").policy_cls)
    plan = get_algorithm("a2c").plan(workers, config)
    result = next(plan)
    # Rounds of 10 steps; 3 microbatches of 10 per update; one update per iteration.
    assert result["num_env_steps_sampled"] == 30
    assert result["num_env_steps_trained"] == 30
    assert plan.metrics.counters[keys.NUM_TRAIN_STEPS] == 1
    assert plan.metrics.timers[keys.COMPUTE_GRADS_TIMER].count == 3


def test_plan_modules_never_import_ray() -> None:
    for spec in ALGORITHMS.values():
        tree = ast.parse(inspect.getsource(inspect.getmodule(spec.plan)))  # type: ignore[arg-type]
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n == "ray" or n.startswith("ray.") for n in names), spec.name

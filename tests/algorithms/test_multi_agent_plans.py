"""The unchanged plans (ppo, dqn, impala, a2c) on multi_cartpole with two policies."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rlflow

pytestmark = pytest.mark.timeout(120)

# Respawning poles and a 25-step horizon: every agent acts every step but one after a fall,
# and episodes end on a known schedule, so per-policy returns exist after the first iteration.
MULTI: dict[str, Any] = {
    "env": "multi_cartpole",
    "env_config": {"num_agents": 2, "respawn": True, "horizon": 25},
    "model": {"hidden": (8,)},
    "policies": {"p0": {}, "p1": {}},
    "seed": 0,
}

SMALL: dict[str, dict[str, Any]] = {
    "ppo": {
        "num_workers": 0,
        "rollout_fragment_length": 50,
        "train_batch_size": 50,
        "sgd_minibatch_size": 25,
        "num_sgd_iter": 2,
    },
    "dqn": {
        "num_workers": 0,
        "rollout_fragment_length": 10,
        "train_batch_size": 16,
        "learning_starts": 20,
        "min_steps_per_iteration": 50,
        "min_time_s_per_iteration": 0.0,
        "buffer_size": 500,
        "target_network_update_freq": 20,
    },
    "impala": {
        "num_workers": 1,
        "rollout_fragment_length": 25,
        "train_batch_size": 50,
        "min_time_s_per_iteration": 0.0,
    },
    "a2c": {
        "num_workers": 1,
        "rollout_fragment_length": 25,
        "train_batch_size": 50,
        "min_time_s_per_iteration": 0.0,
    },
}


def by_agent(agent: str) -> str:
    return "p0" if agent == "agent_0" else "p1"


def trainer(algo: str, backend: str = "local", **kw: Any) -> rlflow.Trainer:
    config = {**MULTI, **SMALL[algo], "policy_mapping_fn": by_agent, **kw}
    return rlflow.Trainer(algo, config=config, backend=backend)


def changed(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return any(not np.array_equal(before[name], after[name]) for name in before)


def check_two_iterations(run: rlflow.Trainer) -> None:
    for iteration in (1, 2):
        result = run.train()
        assert result["iteration"] == iteration
    assert sorted(result["policy_reward_mean"]) == ["p0", "p1"]
    for pid in ("p0", "p1"):
        assert result[f"policy_reward_mean/{pid}"] == result["policy_reward_mean"][pid]
        low, high = result["policy_reward_min"][pid], result["policy_reward_max"][pid]
        assert 1.0 <= low <= result["policy_reward_mean"][pid] <= high <= 25.0  # pole lives
    # Nearly two rows per env step (one per pole, but not right after a fall).
    env_steps, agent_steps = result["num_env_steps_sampled"], result["num_agent_steps_sampled"]
    assert env_steps < agent_steps <= 2 * env_steps
    assert sorted(result["info"]["learner"]) == ["p0", "p1"]


@pytest.mark.parametrize("algo", ["ppo", "dqn", "impala", "a2c"])
def test_two_policies_train_and_report_per_policy(algo: str, local_backend: None) -> None:
    run = trainer(algo)
    try:
        assert run.workers.local_worker().multi_agent
        before = run.workers.local_worker().get_weights()
        check_two_iterations(run)
        after = run.workers.local_worker().get_weights()
        assert changed(before["p0"], after["p0"]) and changed(before["p1"], after["p1"])
    finally:
        run.stop()


@pytest.mark.parametrize("algo", ["ppo", "dqn", "impala", "a2c"])
def test_only_policies_to_train_learn(algo: str, local_backend: None) -> None:
    run = trainer(algo, policies_to_train=["p0"])
    try:
        local = run.workers.local_worker()
        before = local.get_weights()
        for _ in range(2):
            result = run.train()
        after = local.get_weights()
        assert changed(before["p0"], after["p0"])
        assert not changed(before["p1"], after["p1"])
        assert list(result["info"]["learner"]) == ["p0"]
        # The frozen policy still acts and is reported.
        assert sorted(result["policy_reward_mean"]) == ["p0", "p1"]
    finally:
        run.stop()


@pytest.mark.ray
def test_two_policies_on_ray_with_a_remote_worker(ray_backend: None) -> None:
    run = trainer("ppo", backend="ray", num_workers=1, policies_to_train=["p0"])
    try:
        local = run.workers.local_worker()
        before = local.get_weights()
        check_two_iterations_frozen_p1(run)
        after = local.get_weights()
        assert changed(before["p0"], after["p0"]) and not changed(before["p1"], after["p1"])
        remote = run.workers.remote_workers()[0]
        weights = rlflow.flow.get(remote.apply.remote(lambda w: w.get_weights()))
        for name, value in after["p0"].items():  # the remote worker acts with p0's new weights
            np.testing.assert_array_equal(weights["p0"][name], value)
    finally:
        run.stop()


def check_two_iterations_frozen_p1(run: rlflow.Trainer) -> None:
    for _ in range(2):
        result = run.train()
    assert sorted(result["policy_reward_mean"]) == ["p0", "p1"]
    assert result["num_env_steps_sampled"] < result["num_agent_steps_sampled"]
    assert list(result["info"]["learner"]) == ["p0"]


@pytest.mark.learning
@pytest.mark.timeout(120)
def test_multi_agent_ppo_learns_both_policies(local_backend: None) -> None:
    config = {
        **MULTI,
        "env_config": {"num_agents": 2},
        "policy_mapping_fn": by_agent,
        "model": {"hidden": (32,)},
        "num_workers": 0,
        "num_envs_per_worker": 4,
        "rollout_fragment_length": 250,
        "train_batch_size": 1000,
        "sgd_minibatch_size": 250,
        "num_sgd_iter": 10,
        "lr": 3e-3,
        "vf_loss_coeff": 0.01,
    }
    run = rlflow.Trainer("ppo", config=config, backend="local")
    best = 0.0
    try:
        steps = 0
        while best < 150 and steps < 150_000:
            result = run.train()
            steps = result["num_env_steps_sampled"]
            best = max(best, min((result.get("policy_reward_mean") or {"-": 0.0}).values()))
    finally:
        run.stop()
    assert best >= 150

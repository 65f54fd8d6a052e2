"""MAPPO's plan (`rlflow.algorithms.mappo.mappo_plan`) on teams: two iterations with Discrete
members (multi-agent CartPole) and with Box members (MPE's speaker-listener, continuous)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlflow.algorithms import get_algorithm
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)

SPEC = get_algorithm("mappo")
SMALL: dict[str, Any] = {
    "num_workers": 0,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 10,
    "train_batch_size": 40,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 2,
    "model": {"hidden": (8,)},
    "min_steps_per_iteration": 40,
    "seed": 0,
}


def _two_iterations(**overrides: Any) -> tuple[WorkerSet, list[dict[str, Any]]]:
    config = SPEC.config_cls(**{**SMALL, **overrides})
    workers = WorkerSet(config, SPEC.policy_cls)
    return workers, list(SPEC.plan(workers, config).take(2))


def test_the_plan_trains_a_team_of_discrete_members() -> None:
    workers, (first, second) = _two_iterations(
        env="multi_cartpole", groups={"team": ["agent_0", "agent_1"]}
    )
    policy = workers.local_worker().policy_map["default_policy"]
    assert isinstance(policy.action_space, gym.spaces.MultiDiscrete)
    assert second["num_env_steps_sampled"] > first["num_env_steps_sampled"] >= 40
    assert second["num_env_steps_trained"] > 0
    stats = second["info"]["learner"]["default_policy"]
    assert stats["value_norm_std"] > 0.0 and np.isfinite(stats["vf_loss"])
    workers.stop()


def mpe_continuous() -> Any:
    from mpe2 import simple_speaker_listener_v4

    return simple_speaker_listener_v4.parallel_env(max_cycles=5, continuous_actions=True)


def test_the_plan_trains_a_team_of_box_members() -> None:
    pytest.importorskip("mpe2")
    workers, (_, second) = _two_iterations(
        env=mpe_continuous, groups={"team": ["speaker_0", "listener_0"]}
    )
    policy = workers.local_worker().policy_map["default_policy"]
    assert isinstance(policy.action_space, gym.spaces.Box)
    assert policy.action_space.shape == (3 + 5,)
    assert second["num_env_steps_trained"] > 0
    assert second["episode_len_mean"] == 5.0
    workers.stop()

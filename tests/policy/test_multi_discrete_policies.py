"""MultiDiscrete actions and flattened observations through the policies: V-trace's ratios of
the joint action, sampled columns, export and load."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical as TorchCategorical

from rlflow import Trainer, load_policy
from rlflow.algorithms import IMPALAConfig
from rlflow.algorithms.impala import VTracePolicy
from rlflow.data import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    EPS_ID,
    LOGP,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
)
from rlflow.data.sequences import cut_sequences
from rlflow.envs.flatten import flatten_observation
from rlflow.envs.targets import DictTargetEnv, MultiDiscreteTargetEnv
from rlflow.learner import stats_to_host

pytestmark = pytest.mark.timeout(120)

NVEC = (3, 4)
OBS_SPACE = gym.spaces.Box(0.0, 1.0, (7,), np.float32)
SMALL = {
    "num_workers": 1,
    "rollout_fragment_length": 32,
    "train_batch_size": 64,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 2,
}


def _batch(policy: VTracePolicy, *, first_component_only: bool) -> SampleBatch:
    rng = np.random.default_rng(0)
    obs = rng.random((7, 7), dtype=np.float32)
    actions = np.stack([rng.integers(0, n, 6) for n in NVEC], axis=-1)
    with torch.no_grad():
        logits, _ = policy.model(torch.from_numpy(obs[:6]))
    parts = torch.split(logits, list(NVEC), dim=-1)
    per_component = [
        TorchCategorical(logits=p).log_prob(torch.from_numpy(actions[:, i]))
        for i, p in enumerate(parts)
    ]
    logp = per_component[0] if first_component_only else sum(per_component)
    steps = SampleBatch(
        {
            OBS: obs[:6],
            ACTIONS: actions,
            REWARDS: rng.random(6, dtype=np.float32),
            TERMINATEDS: np.array([0, 0, 0, 0, 0, 1], bool),
            TRUNCATEDS: np.zeros(6, bool),
            EPS_ID: np.ones(6, np.int64),
            LOGP: logp.numpy(),  # the behaviour policy mu: here the learner's own pi
        }
    )
    return cut_sequences(steps, max_seq_len=None, bootstrap_obs=obs[6])  # one sequence


def test_vtrace_ratios_are_those_of_the_joint_action() -> None:
    policy = VTracePolicy(OBS_SPACE, gym.spaces.MultiDiscrete(list(NVEC)), IMPALAConfig(), seed=0)
    _, stats = policy.loss(
        policy.update.batch_to_tensors(_batch(policy, first_component_only=False))
    )
    stats = stats_to_host(stats)
    assert stats["mean_rho"] == pytest.approx(1.0, abs=1e-5)  # mu = pi: every rho is 1
    # A behaviour logp of the first component alone makes rho = pi(a_2|x) < 1: so the loss
    # sums both components, as the test above needs.
    _, wrong = policy.loss(
        policy.update.batch_to_tensors(_batch(policy, first_component_only=True))
    )
    assert stats_to_host(wrong)["mean_rho"] < 0.5


def test_sampled_batches_hold_one_row_of_components_per_step(local_backend: None) -> None:
    with Trainer("ppo", env=MultiDiscreteTargetEnv, backend="local", **SMALL) as trainer:
        batch = trainer.workers.local_worker().sample()
    assert batch[ACTIONS].shape == (32, 2) and batch[ACTIONS].dtype == np.int64
    assert batch[ACTION_DIST_INPUTS].shape == (32, 7) and batch[LOGP].shape == (32,)
    assert (batch[ACTIONS] < np.array(NVEC)).all() and (batch[ACTIONS] >= 0).all()


def test_multi_discrete_policy_exports(local_backend: None, tmp_path: Path) -> None:
    obs = np.eye(7, dtype=np.float32)[[0, 1, 2, 3]] + np.eye(7, dtype=np.float32)[[4, 5, 6, 3]]
    with Trainer("ppo", env=MultiDiscreteTargetEnv, backend="local", **SMALL) as trainer:
        trainer.train()
        greedy = trainer.compute_actions(obs, explore=False)
        single = trainer.compute_single_action(obs[0])
        path = trainer.export_policy(tmp_path / "md")
    loaded = load_policy(path)
    assert loaded.action_space == gym.spaces.MultiDiscrete(list(NVEC))
    assert greedy.shape == (4, 2)
    np.testing.assert_array_equal(loaded.compute_actions(obs), greedy)
    np.testing.assert_array_equal(loaded.compute_single_action(obs[0]), single)


def test_dict_policy_acts_on_flattened_observations(local_backend: None, tmp_path: Path) -> None:
    env = DictTargetEnv()
    raw, _ = env.reset(seed=3)
    flat = flatten_observation(env.observation_space, raw)
    with Trainer("ppo", env=DictTargetEnv, backend="local", **SMALL) as trainer:
        trainer.train()
        action = trainer.compute_single_action(flat)
        path = trainer.export_policy(tmp_path / "dict")
    loaded = load_policy(path)
    assert loaded.observation_space.shape == (8,)
    assert loaded.compute_single_action(flat) == action


@pytest.mark.parametrize("algo", ["pg", "a2c", "a3c", "appo"])
def test_the_other_policy_gradient_algorithms_train_on_multi_discrete(
    local_backend: None, algo: str
) -> None:
    fields = {k: v for k, v in SMALL.items() if k in ("num_workers", "rollout_fragment_length")}
    fields["min_time_s_per_iteration"] = 0.0  # iterations of a batch, not a2c/a3c/appo's 1 s
    with Trainer(
        algo, env=MultiDiscreteTargetEnv, backend="local", train_batch_size=64, **fields
    ) as trainer:
        policy = trainer.workers.local_worker().policy_map["default_policy"]
        before = {k: v.copy() for k, v in policy.get_weights().items()}
        for _ in range(3):
            result = trainer.train()
        after = policy.get_weights()
    assert result["num_env_steps_trained"] > 0
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    assert all(np.isfinite(v).all() for v in after.values())

"""A non-finite loss or gradient never reaches the weights: the update is skipped and counted,
and ``max_nonfinite_updates`` in a row stop the run (issue 23 part 4)."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow.algorithms import DQNConfig, PPOConfig
from rlflow.algorithms.dqn.policy import DQNPolicy
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.data.sample_batch import (
    ACTIONS,
    ADVANTAGES,
    DISCOUNTS,
    NEXT_OBS,
    OBS,
    REWARDS,
    TD_ERROR,
    TERMINATEDS,
    VALUE_TARGETS,
    SampleBatch,
)
from rlflow.errors import NonFiniteError
from rlflow.replay import BATCH_INDEXES

pytestmark = pytest.mark.timeout(120)

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
ACT_SPACE = gym.spaces.Discrete(2)


def ppo_policy(**config: Any) -> PPOPolicy:
    fields = {"lr": 0.01, "model": {"hidden": (8,)}, "max_nonfinite_updates": 3, **config}
    return PPOPolicy(OBS_SPACE, ACT_SPACE, PPOConfig(**fields), seed=0)


def batch(policy: PPOPolicy, *, advantage: float | None = None, n: int = 32) -> SampleBatch:
    """Rows with every column PPO's loss reads; ``advantage`` (e.g. NaN) in every row if given."""
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (n, 4)).astype(np.float32)
    actions, extra = policy.compute_actions(obs)
    advantages = rng.normal(size=n).astype(np.float32)
    if advantage is not None:
        advantages[:] = advantage
    return SampleBatch(
        {
            OBS: obs,
            ACTIONS: actions,
            **extra,
            ADVANTAGES: advantages,
            VALUE_TARGETS: rng.normal(size=n).astype(np.float32),
        }
    )


def state_of(policy: PPOPolicy) -> dict[str, Any]:
    return copy.deepcopy(
        {"weights": policy.get_weights(), "optimizer": policy.update.optimizer.state_dict()}
    )


def same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    weights = all(np.array_equal(a["weights"][k], b["weights"][k]) for k in a["weights"])
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    moments = sa.keys() == sb.keys() and all(
        torch.equal(sa[i][m], sb[i][m]) for i in sa for m in ("exp_avg", "exp_avg_sq", "step")
    )
    return weights and moments


def test_a_nonfinite_loss_skips_the_update_and_counts_it() -> None:
    policy = ppo_policy()
    policy.update.learn_on_batch(batch(policy))  # one finite update: the optimizer has state
    before = state_of(policy)
    stats = policy.update.learn_on_batch(batch(policy, advantage=float("nan")))
    assert np.isnan(stats["policy_loss"]) and np.isnan(stats["total_loss"])
    assert same_state(before, state_of(policy))
    assert (policy.update.num_grad_updates, policy.update.num_nonfinite_updates) == (1, 1)
    assert policy.update.last_update_skipped
    policy.update.learn_on_batch(batch(policy))  # a finite one ends the streak and steps again
    assert (policy.update.num_grad_updates, policy.update.num_nonfinite_updates) == (2, 1)
    assert not same_state(before, state_of(policy))


def test_an_infinite_gradient_with_a_finite_loss_is_skipped_too() -> None:
    policy = ppo_policy()
    before = state_of(policy)
    for p in policy.model.parameters():
        p.grad = torch.full_like(p, float("inf"))
    assert not policy.update.apply_update(
        {"total_loss": torch.tensor(1.0), "grad_gnorm": torch.tensor(float("inf"))}
    )
    assert same_state(before, state_of(policy)) and policy.update.num_nonfinite_updates == 1


def test_max_nonfinite_updates_in_a_row_is_an_error_naming_policy_terms_and_last_values() -> None:
    policy = ppo_policy()
    finite = policy.update.learn_on_batch(batch(policy))
    nan_batch = batch(policy, advantage=float("nan"))
    policy.update.learn_on_batch(nan_batch)
    policy.update.learn_on_batch(nan_batch)
    weights = policy.get_weights()
    with pytest.raises(NonFiniteError) as info:
        policy.update.learn_on_batch(nan_batch)
    message = str(info.value)
    assert message.startswith(
        "policy 'default_policy' (PPOPolicy): 3 updates in a row had a NaN or infinite loss or "
        "gradient (max_nonfinite_updates=3); each was skipped"
    )
    assert "(1 updates taken, 3 skipped)" in message
    # The advantages feed the surrogate only: those terms are named, with their last values.
    assert "Not finite in the last one: policy_loss=nan" in message
    assert f"policy_loss={finite['policy_loss']:.6g}" in message.split("last finite values")[1]
    assert "vf_loss=" not in message.split("last finite values")[0]
    assert all(np.array_equal(weights[k], w) for k, w in policy.get_weights().items())


def test_minibatch_sgd_skips_each_nonfinite_step() -> None:
    policy = ppo_policy(max_nonfinite_updates=100)
    before = state_of(policy)
    rng = np.random.default_rng(0)
    stats = policy.update.learn_on_minibatches(
        batch(policy, advantage=float("nan")), num_sgd_iter=3, sgd_minibatch_size=8, rng=rng
    )
    assert stats["num_steps"] == 12 and policy.update.num_nonfinite_updates == 12
    assert policy.update.num_grad_updates == 0 and same_state(before, state_of(policy))


def test_apply_gradients_skips_nonfinite_gradients() -> None:
    policy = ppo_policy()
    grads, _ = policy.update.compute_gradients(batch(policy))
    grads[0] = np.full_like(grads[0], np.nan)
    before = state_of(policy)
    policy.update.apply_gradients(grads)
    assert same_state(before, state_of(policy))
    assert (policy.update.num_grad_updates, policy.update.num_nonfinite_updates) == (0, 1)


def test_the_count_is_part_of_the_policy_state() -> None:
    policy = ppo_policy()
    policy.update.learn_on_batch(batch(policy, advantage=float("inf")))
    restored = ppo_policy()
    restored.set_state(policy.get_state())
    assert restored.update.num_nonfinite_updates == 1


def test_a_skipped_dqn_update_reports_no_td_errors_for_priorities() -> None:
    config = DQNConfig(lr=0.01, model={"hidden": (8,)}, max_nonfinite_updates=5)
    policy = DQNPolicy(OBS_SPACE, ACT_SPACE, config, seed=0)
    n = 16
    rows = SampleBatch(
        {
            OBS: np.zeros((n, 4), np.float32),
            NEXT_OBS: np.zeros((n, 4), np.float32),
            ACTIONS: np.zeros(n, np.int64),
            REWARDS: np.full(n, np.nan, np.float32),
            TERMINATEDS: np.zeros(n, bool),
            DISCOUNTS: np.full(n, 0.99, np.float32),
            BATCH_INDEXES: np.arange(n),
        }
    )
    stats = policy.update.learn_on_batch(rows)
    assert TD_ERROR not in stats and policy.update.num_nonfinite_updates == 1
    rows[REWARDS] = np.ones(n, np.float32)
    assert TD_ERROR in policy.update.learn_on_batch(rows)


def test_actions_from_diverged_weights_are_an_error_not_a_torch_crash() -> None:
    policy = ppo_policy()
    with torch.no_grad():
        for p in policy.model.parameters():
            p.fill_(1e38)
    expected = r"weights have diverged \(largest \|weight\| 1e\+38\)"
    with pytest.raises(NonFiniteError, match=expected):
        policy.compute_actions(np.ones((2, 4), np.float32))

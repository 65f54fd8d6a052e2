"""MAMLPolicy: the inner step (golden: one SGD step by hand), the meta-gradient, the baseline."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlflow.algorithms.maml import MAMLConfig
from rlflow.algorithms.maml.policy import (
    MAMLPolicy,
    episode_returns,
    episode_timesteps,
    linear_feature_baseline,
)
from rlflow.data import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    ADVANTAGES,
    EPS_ID,
    LOGP,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VALUE_TARGETS,
    SampleBatch,
)
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(60)

OBS_SPACE = spaces.Box(-np.inf, np.inf, (2,), np.float32)
ACT_SPACE = spaces.Box(-0.1, 0.1, (2,), np.float32)


def make_policy(**config: Any) -> MAMLPolicy:
    # lr 3e-4 and clip_param 0.2: the settings these tests were written for.
    base: dict[str, Any] = {
        "inner_lr": 0.5,
        "model": {"hidden": (8,)},
        "kl_coeff": 0.0,
        "lr": 3e-4,
        "clip_param": 0.2,
    }
    return MAMLPolicy(OBS_SPACE, ACT_SPACE, MAMLConfig(**{**base, **config}), seed=0)


def sampled_batch(policy: MAMLPolicy, n: int = 32, seed: int = 0) -> SampleBatch:
    """Rows acted by ``policy`` with random standardized advantages (as a worker samples)."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-0.5, 0.5, (n, 2)).astype(np.float32)
    actions, extra = policy.compute_actions(obs)
    adv = rng.normal(size=n).astype(np.float32)
    return SampleBatch(
        {
            OBS: obs,
            ACTIONS: actions,
            LOGP: extra[LOGP],
            ACTION_DIST_INPUTS: extra[ACTION_DIST_INPUTS],
            ADVANTAGES: (adv - adv.mean()) / adv.std(),
        }
    )


def test_no_critic_and_value_head_not_adapted() -> None:
    policy = make_policy()  # MAMLConfig has no use_critic: the policy never has a critic
    assert not policy.use_critic and not hasattr(policy.config, "use_gae")
    assert policy.adapted_names and not any(n.startswith("vf.") for n in policy.adapted_names)
    assert "log_std" in policy.adapted_names


def test_bad_inner_lr_names_the_key() -> None:
    with pytest.raises(ConfigError, match="inner_lr"):
        make_policy(inner_lr=0.0)


def test_adapt_is_one_sgd_step_by_hand() -> None:
    policy = make_policy()
    batch = sampled_batch(policy)
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    # By hand: -mean(logp * A) through the plain model, backward, p - lr * grad.
    t = policy.update.batch_to_tensors(batch)
    policy.model.zero_grad()
    dist = policy.dist_class(policy.model(t[OBS])[0])
    hand_loss = -(dist.logp(t[ACTIONS]) * t[ADVANTAGES]).mean()
    hand_loss.backward()
    expected = {
        n: before[n] - 0.5 * (p.grad if p.grad is not None else torch.zeros_like(p))
        for n, p in policy.model.named_parameters()
    }
    policy.model.zero_grad()
    functional = policy.adapted_parameters([t], create_graph=False)
    stats = policy.adapt(batch)
    assert stats["inner_loss"] == pytest.approx(float(hand_loss.detach()))
    for name, p in policy.model.named_parameters():
        torch.testing.assert_close(p.detach(), expected[name], rtol=1e-6, atol=1e-7)
        if name in functional:
            torch.testing.assert_close(functional[name].detach(), expected[name])
    # The value head did not move; the optimizer was not used.
    assert all(torch.equal(p, before[n]) for n, p in policy.model.named_parameters() if "vf." in n)
    assert not policy.update.optimizer.state


def test_learner_recomputes_the_workers_adapted_policy() -> None:
    learner, worker = make_policy(), make_policy()
    pre = sampled_batch(worker, seed=1)
    worker.adapt(pre)
    post = sampled_batch(worker, seed=2)  # acted by the adapted worker policy
    params = learner.adapted_parameters([learner.update.batch_to_tensors(pre)])
    loss, parts = learner.surrogate(params, learner.update.batch_to_tensors(post))
    # Same parameters as the worker's, so the probability ratio is 1 on every row.
    assert float(parts["clip_frac"]) == 0.0
    assert float(parts["kl"].detach()) == pytest.approx(0.0, abs=1e-9)
    assert float(loss.detach()) == pytest.approx(-float(post[ADVANTAGES].mean()), abs=1e-5)


def test_meta_gradient_has_second_order_terms_and_matches_finite_differences() -> None:
    policy = make_policy()
    pre, post = sampled_batch(policy, seed=3), sampled_batch(policy, seed=4)
    # The model casts observations to float32, so the differences are float32 ones: a
    # larger step and a looser tolerance.
    pre_t, post_t = policy.update.batch_to_tensors(pre), policy.update.batch_to_tensors(post)
    tasks = [[pre_t, post_t]]
    loss, _ = policy.meta_loss(tasks)
    meta = policy.meta_parameters()
    grads = torch.autograd.grad(loss, list(meta.values()))
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    # First-order MAML (inner gradient treated as a constant) gives a different gradient.
    first = policy.adapted_parameters([pre_t], create_graph=False)
    fo_loss = policy.surrogate(first, post_t)[0]
    fo_grads = torch.autograd.grad(fo_loss, list(meta.values()))
    assert any(not torch.allclose(a, b) for a, b in zip(grads, fo_grads, strict=True))
    # Directional derivative along a random direction, by central differences.
    gen = torch.Generator().manual_seed(0)
    direction = [torch.randn(p.shape, generator=gen, dtype=p.dtype) for p in meta.values()]
    analytic = sum(float((g * d).sum()) for g, d in zip(grads, direction, strict=True))
    eps = 1e-3
    values = []
    for sign in (1.0, -1.0):
        with torch.no_grad():
            for p, d in zip(meta.values(), direction, strict=True):
                p.add_(sign * eps * d)
        values.append(float(policy.meta_loss(tasks)[0].detach()))
        with torch.no_grad():
            for p, d in zip(meta.values(), direction, strict=True):
                p.sub_(sign * eps * d)
    assert analytic == pytest.approx((values[0] - values[1]) / (2 * eps), rel=2e-2, abs=1e-5)


def test_meta_update_moves_the_meta_parameters_and_reports_stats() -> None:
    policy = make_policy()
    worker = make_policy()
    pre = sampled_batch(worker, seed=5)
    worker.adapt(pre)
    post = sampled_batch(worker, seed=6)
    before = [p.detach().clone() for p in policy.model.parameters()]
    stats = policy.meta_update([[pre, post], [pre, post]], num_steps=3)
    assert stats["num_steps"] == 3.0
    assert stats["meta_loss"] < stats["meta_loss_start"]
    assert {"policy_loss", "kl", "clip_frac", "inner_loss", "grad_gnorm"} <= set(stats)
    moved = [not torch.equal(a, b) for a, b in zip(before, policy.model.parameters(), strict=True)]
    assert any(moved)
    with pytest.raises(ConfigError, match="num_steps"):
        policy.meta_update([[pre, post]], num_steps=0)
    with pytest.raises(ConfigError, match=r">= 1 task"):
        policy.meta_update([], num_steps=1)


def test_zero_inner_steps_is_the_ppo_loss() -> None:
    policy = make_policy(kl_coeff=0.2)
    batch = sampled_batch(policy, seed=7)
    t = policy.update.batch_to_tensors(batch)
    meta, _ = policy.meta_loss([[t]])
    ppo, _ = policy.loss(t)
    torch.testing.assert_close(meta, ppo)


def test_episode_timesteps_and_returns_golden() -> None:
    assert episode_timesteps([3, 3, 3, 5, 5, 3]).tolist() == [0, 1, 2, 0, 1, 0]
    assert episode_timesteps([]).tolist() == []
    batch = {
        EPS_ID: np.array([1, 1, 1, 2, 2, 3]),
        REWARDS: np.array([-1.0, -2.0, -3.0, -0.5, -0.5, -9.0]),
        TERMINATEDS: np.array([False, False, False, True, False, False]),
        TRUNCATEDS: np.array([False, False, True, False, False, False]),
    }
    # Episode 3 does not end in the batch: left out.
    assert episode_returns(batch) == [-6.0, -1.0]


def test_linear_feature_baseline_matches_least_squares() -> None:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(50, 2))
    t = np.tile(np.arange(10), 5)
    returns = rng.normal(size=50)
    fit = linear_feature_baseline(obs, returns, t, reg=0.0)
    al = t[:, None] / 100.0
    feats = np.concatenate([obs, obs**2, al, al**2, al**3, np.ones_like(al)], axis=1)
    expected = feats @ np.linalg.lstsq(feats, returns, rcond=None)[0]
    np.testing.assert_allclose(fit, expected, rtol=1e-6, atol=1e-8)


def test_with_baseline_advantages_standardizes_and_is_idempotent() -> None:
    policy = make_policy()
    rng = np.random.default_rng(1)
    batch = SampleBatch(
        {
            OBS: rng.normal(size=(20, 2)).astype(np.float32),
            EPS_ID: np.repeat([1, 2], 10),
            VALUE_TARGETS: rng.normal(size=20).astype(np.float32),
            ADVANTAGES: np.zeros(20, dtype=np.float32),
        }
    )
    once = policy.with_baseline_advantages(batch)
    twice = policy.with_baseline_advantages(once)
    assert abs(float(once[ADVANTAGES].mean())) < 1e-5
    assert float(once[ADVANTAGES].std()) == pytest.approx(1.0, rel=1e-4)
    np.testing.assert_array_equal(once[ADVANTAGES], twice[ADVANTAGES])
    np.testing.assert_array_equal(batch[ADVANTAGES], np.zeros(20))  # input untouched

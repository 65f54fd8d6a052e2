"""Tests for rlflow.policy: TorchPolicy mechanics, PGPolicy learning, PPOPolicy's loss."""

from __future__ import annotations

import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow.algorithms import PGConfig, PPOConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    ADVANTAGES,
    LOGP,
    OBS,
    REWARDS,
    VALUE_TARGETS,
    VF_PREDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.learner import stats_to_host
from rlflow.models import Categorical, NatureCNN
from rlflow.policy import TorchPolicy

pytestmark = pytest.mark.timeout(120)

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
ACT_SPACE = gym.spaces.Discrete(3)
SMALL: dict[str, Any] = {"lr": 0.01, "model": {"hidden": (16, 16)}}


def pg(config: dict[str, Any]) -> PGConfig:
    """A `PGConfig` with ``config``; unset, the settings these tests were written for: a
    critic with GAE (without a critic, no GAE) and lr 3e-4."""
    critic = config.get("use_critic", True)
    return PGConfig(**{"lr": 3e-4, "use_critic": critic, "use_gae": critic, **config})


def ppo(config: dict[str, Any]) -> PPOConfig:
    """A `PPOConfig` with ``config``; unset, the settings these tests were written for:
    clip_param 0.2, lambda_ 1.0, lr 3e-4 (no GAE without a critic)."""
    critic = config.get("use_critic", True)
    base = {"lr": 3e-4, "clip_param": 0.2, "lambda_": 1.0, "use_gae": critic}
    return PPOConfig(**{**base, **config})


def typed(cls: type[TorchPolicy], config: dict[str, Any]) -> PGConfig | PPOConfig:
    """``config`` as the config class of ``cls`` (`PGPolicy` or `PPOPolicy`)."""
    return pg(config) if cls is PGPolicy else ppo(config)


def _rollout(policy: TorchPolicy, n: int = 64, seed: int = 0) -> SampleBatch:
    """A batch with every column the losses read (advantages and targets made up)."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (n, 4)).astype(np.float32)
    actions, extra = policy.compute_actions(obs)
    columns = {OBS: obs, ACTIONS: actions, **extra}
    columns[ADVANTAGES] = rng.normal(size=n).astype(np.float32)
    columns[VALUE_TARGETS] = rng.normal(size=n).astype(np.float32)
    return SampleBatch(columns)


def _same_weights(a: TorchPolicy, b: TorchPolicy) -> bool:
    wa, wb = a.get_weights(), b.get_weights()
    return wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)


# -- acting -------------------------------------------------------------------------------------


def test_compute_actions_shapes_and_consistent_logp() -> None:
    policy = PGPolicy(OBS_SPACE, ACT_SPACE, pg(SMALL), seed=0)
    obs = np.random.default_rng(0).uniform(-1, 1, (8, 4))  # float64 is accepted
    actions, extra = policy.compute_actions(obs)
    assert actions.shape == (8,) and actions.dtype == np.int64
    assert set(extra) == {LOGP, VF_PREDS, ACTION_DIST_INPUTS}
    assert extra[LOGP].shape == (8,) and extra[VF_PREDS].shape == (8,)
    assert extra[ACTION_DIST_INPUTS].shape == (8, 3)
    dist = Categorical(torch.from_numpy(extra[ACTION_DIST_INPUTS]))
    np.testing.assert_allclose(dist.logp(torch.from_numpy(actions)).numpy(), extra[LOGP])
    np.testing.assert_allclose(policy.value(obs), extra[VF_PREDS])
    greedy, _ = policy.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(greedy, extra[ACTION_DIST_INPUTS].argmax(-1))


def test_same_seed_same_model_and_actions_global_rng_untouched() -> None:
    obs = np.zeros((32, 4), np.float32)
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = PGPolicy(OBS_SPACE, ACT_SPACE, pg(SMALL), seed=7)
    b = PGPolicy(OBS_SPACE, ACT_SPACE, pg(SMALL), seed=7)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert _same_weights(a, b)
    np.testing.assert_array_equal(a.compute_actions(obs)[0], b.compute_actions(obs)[0])
    c = PGPolicy(OBS_SPACE, ACT_SPACE, pg(SMALL), seed=8)
    assert not _same_weights(a, c)


def test_gaussian_policy_acts_and_learns() -> None:
    space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    policy = PPOPolicy(OBS_SPACE, space, ppo(SMALL), seed=0)
    obs = np.zeros((5, 4), np.float32)
    actions, extra = policy.compute_actions(obs)
    assert actions.shape == (5, 2) and actions.dtype == np.float32
    assert extra[ACTION_DIST_INPUTS].shape == (5, 4)
    stats = policy.update.learn_on_batch(_rollout(policy))
    assert np.isfinite(stats["total_loss"])


def test_image_policy_accepts_uint8() -> None:
    space = gym.spaces.Box(0, 255, (84, 84, 4), dtype=np.uint8)
    policy = PPOPolicy(space, gym.spaces.Discrete(4), ppo({}), seed=0)
    assert isinstance(policy.model.trunk, NatureCNN)
    obs = np.stack([space.sample() for _ in range(3)])
    actions, extra = policy.compute_actions(obs)
    assert actions.shape == (3,) and extra[VF_PREDS].shape == (3,)


# -- weights and state --------------------------------------------------------------------------


def test_get_set_weights_round_trip_gives_identical_actions() -> None:
    trained = PGPolicy(OBS_SPACE, ACT_SPACE, pg(SMALL), seed=0)
    for i in range(3):
        trained.update.learn_on_batch(_rollout(trained, seed=i))
    weights = trained.get_weights()
    assert all(isinstance(v, np.ndarray) for v in weights.values())
    fresh = PGPolicy(OBS_SPACE, ACT_SPACE, pg(SMALL), seed=99)
    fresh.set_weights(pickle.loads(pickle.dumps(weights)))
    obs = np.random.default_rng(5).uniform(-1, 1, (50, 4)).astype(np.float32)
    a_act, a_extra = trained.compute_actions(obs, explore=False)
    b_act, b_extra = fresh.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(a_act, b_act)
    for key in a_extra:
        np.testing.assert_array_equal(a_extra[key], b_extra[key])
    # The returned dict is a copy: editing it leaves the policy alone.
    next(iter(weights.values()))[...] = 0.0
    np.testing.assert_array_equal(trained.compute_actions(obs, explore=False)[0], a_act)


def test_set_weights_rejects_other_model() -> None:
    other = PGPolicy(OBS_SPACE, ACT_SPACE, pg({"model": {"hidden": (8,)}}), seed=0)
    policy = PGPolicy(OBS_SPACE, ACT_SPACE, pg(SMALL), seed=0)
    with pytest.raises(ConfigError, match="do not fit the model"):
        policy.set_weights(other.get_weights())
    with pytest.raises(RuntimeError, match="size mismatch"):
        policy.set_weights({k: np.zeros(3) for k in policy.get_weights()})


def _continue(policy: TorchPolicy, steps: int) -> list[np.ndarray]:
    sampled = []
    for i in range(steps):
        batch = _rollout(policy, seed=100 + i)
        sampled.append(batch[ACTIONS])
        policy.update.learn_on_batch(batch)
    return sampled


@pytest.mark.parametrize("cls", [PGPolicy, PPOPolicy])
def test_set_state_restores_optimizer_and_rng(cls: type[TorchPolicy]) -> None:
    policy = cls(OBS_SPACE, ACT_SPACE, typed(cls, SMALL), seed=0)
    _continue(policy, 5)
    if isinstance(policy, PPOPolicy):
        policy.update_kl(1.0)
    state = pickle.loads(pickle.dumps(policy.get_state()))
    first_actions = _continue(policy, 5)
    first_weights = policy.get_weights()

    restored = cls(OBS_SPACE, ACT_SPACE, typed(cls, SMALL), seed=42)
    restored.set_state(state)
    second_actions = _continue(restored, 5)
    assert _same_weights(policy, restored)
    for a, b in zip(first_actions, second_actions, strict=True):
        np.testing.assert_array_equal(a, b)

    # Weights alone are not enough: a fresh Adam state takes different steps.
    weights_only = cls(OBS_SPACE, ACT_SPACE, typed(cls, SMALL), seed=42)
    weights_only.set_weights(state["weights"])
    weights_only.generator.set_state(torch.from_numpy(state["generator"]))
    _continue(weights_only, 5)
    assert not all(
        np.array_equal(first_weights[k], v) for k, v in weights_only.get_weights().items()
    )


# -- gradients ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [PGPolicy, PPOPolicy])
@pytest.mark.parametrize("grad_clip", [None, 0.05])
def test_compute_apply_gradients_equals_learn_on_batch(
    cls: type[TorchPolicy], grad_clip: float | None
) -> None:
    config = {**SMALL, "grad_clip": grad_clip, "use_critic": cls is PPOPolicy}
    a = cls(OBS_SPACE, ACT_SPACE, typed(cls, config), seed=1)
    b = cls(OBS_SPACE, ACT_SPACE, typed(cls, config), seed=1)
    for i in range(4):
        batch = _rollout(a, seed=i)
        before = a.get_weights()
        stats_a = a.update.learn_on_batch(batch)
        grads, stats_b = b.update.compute_gradients(batch)
        assert len(grads) == len(list(b.model.parameters()))
        # compute_gradients leaves the weights alone.
        assert all(np.array_equal(before[k], v) for k, v in b.get_weights().items())
        b.update.apply_gradients(grads)
        assert _same_weights(a, b)
        assert stats_a == stats_b
        if grad_clip is not None:
            norm = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads))
            assert stats_b["grad_gnorm"] > grad_clip  # clipping was active
            assert norm == pytest.approx(grad_clip, rel=1e-4)


def test_apply_gradients_checks_count_and_shapes() -> None:
    policy = PGPolicy(OBS_SPACE, ACT_SPACE, pg(SMALL), seed=0)
    grads, _ = policy.update.compute_gradients(_rollout(policy))
    with pytest.raises(ConfigError, match="gradients for"):
        policy.update.apply_gradients(grads[:-1])
    with pytest.raises(ConfigError, match="shape"):
        policy.update.apply_gradients([np.zeros(1)] * len(grads))


def test_learn_on_minibatches_equals_manual_loop() -> None:
    a = PPOPolicy(OBS_SPACE, ACT_SPACE, ppo(SMALL), seed=3)
    b = PPOPolicy(OBS_SPACE, ACT_SPACE, ppo(SMALL), seed=3)
    batch = _rollout(a, n=100)
    stats = a.update.learn_on_minibatches(
        batch, num_sgd_iter=3, sgd_minibatch_size=32, rng=np.random.default_rng(0)
    )
    rng, kls = np.random.default_rng(0), []
    for _ in range(3):
        kls += [b.update.learn_on_batch(mb)["kl"] for mb in batch.minibatches(32, rng)]
    assert _same_weights(a, b)
    assert stats["num_steps"] == 9.0 == len(kls)
    assert stats["kl"] == pytest.approx(np.mean(kls))
    with pytest.raises(ConfigError, match="num_sgd_iter=0"):
        a.update.learn_on_minibatches(batch, num_sgd_iter=0, sgd_minibatch_size=32, rng=rng)


# -- learning -----------------------------------------------------------------------------------


def test_pg_learns_two_armed_bandit() -> None:
    obs_space = gym.spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
    config = {"lr": 0.01, "use_critic": False, "use_gae": False, "model": {"hidden": (16,)}}
    policy = PGPolicy(obs_space, gym.spaces.Discrete(2), pg(config), seed=0)
    obs = np.ones((32, 1), np.float32)
    for _ in range(300):
        actions, extra = policy.compute_actions(obs)
        rewards = (actions == 1).astype(np.float32)
        # One-step episodes: the REINFORCE advantage is the reward itself.
        batch = SampleBatch({OBS: obs, ACTIONS: actions, REWARDS: rewards, ADVANTAGES: rewards})
        policy.update.learn_on_batch(batch)
    _, extra = policy.compute_actions(obs[:1])
    prob_1 = float(torch.softmax(torch.from_numpy(extra[ACTION_DIST_INPUTS]), -1)[0, 1])
    assert prob_1 > 0.95


def test_postprocess_trajectory_uses_config() -> None:
    rewards = np.array([1.0, 1.0, 1.0], np.float32)
    no_critic = PGPolicy(OBS_SPACE, ACT_SPACE, pg({"gamma": 0.5, "use_critic": False}), seed=0)
    out = no_critic.postprocess_trajectory(SampleBatch({REWARDS: rewards}), last_value=0.0)
    np.testing.assert_allclose(out[ADVANTAGES], [1.75, 1.5, 1.0])
    # GAE with lambda=1 is the discounted return (bootstrapped) minus the value.
    critic = PGPolicy(OBS_SPACE, ACT_SPACE, pg({"gamma": 0.5, "lambda_": 1.0}), seed=0)
    batch = SampleBatch({REWARDS: rewards, VF_PREDS: np.array([0.5, 0.0, 1.0], np.float32)})
    out = critic.postprocess_trajectory(batch, last_value=2.0)
    np.testing.assert_allclose(out[VALUE_TARGETS], [2.0, 2.0, 2.0])
    np.testing.assert_allclose(out[ADVANTAGES], [1.5, 2.0, 1.0])


# -- PPO loss -----------------------------------------------------------------------------------


def test_ppo_loss_at_ratio_one_and_clipped() -> None:
    policy = PPOPolicy(OBS_SPACE, ACT_SPACE, ppo({**SMALL, "use_critic": False}), seed=0)
    batch = _rollout(policy)
    adv = batch[ADVANTAGES]
    stats = stats_to_host(policy.loss(policy.update.batch_to_tensors(batch))[1])
    assert stats["kl"] == pytest.approx(0.0, abs=1e-6)
    assert stats["policy_loss"] == pytest.approx(-adv.mean(), abs=1e-5)
    assert stats["clip_frac"] == 0.0
    # Old logp lower by log 2 gives ratio 2: positive advantages are clipped at 1 + 0.2.
    batch[ADVANTAGES] = np.abs(adv)
    batch[LOGP] = batch[LOGP] - np.log(2.0)
    loss, stats = policy.loss(policy.update.batch_to_tensors(batch))
    stats = stats_to_host(stats)
    assert stats["policy_loss"] == pytest.approx(-1.2 * np.abs(adv).mean(), rel=1e-5)
    assert stats["clip_frac"] == 1.0
    policy.model.zero_grad()
    loss.backward()  # the clipped branch has no policy gradient (the KL term is 0 at r=2 too)
    assert all(
        p.grad is None or float(p.grad.abs().max()) < 1e-6 for p in policy.model.pi.parameters()
    )


def test_ppo_value_clipping_hand_values() -> None:
    config = {**SMALL, "vf_clip_param": 1.0, "vf_loss_coeff": 1.0, "kl_coeff": 0.0}
    policy = PPOPolicy(OBS_SPACE, ACT_SPACE, ppo(config), seed=0)
    batch = _rollout(policy)
    values = batch[VF_PREDS]
    batch[VF_PREDS] = values - 5.0  # old prediction; clipped new value is values - 4
    batch[VALUE_TARGETS] = values + 10.0  # errors: 10^2 unclipped, 14^2 clipped
    stats = stats_to_host(policy.loss(policy.update.batch_to_tensors(batch))[1])
    assert stats["vf_loss"] == pytest.approx(196.0, rel=1e-5)
    unclipped = PPOPolicy(OBS_SPACE, ACT_SPACE, ppo({**config, "vf_clip_param": None}), seed=0)
    stats = stats_to_host(unclipped.loss(unclipped.update.batch_to_tensors(batch))[1])
    assert stats["vf_loss"] == pytest.approx(100.0, rel=1e-5)


def test_ppo_update_kl_rules_and_state() -> None:
    policy = PPOPolicy(OBS_SPACE, ACT_SPACE, ppo({"kl_coeff": 0.2, "kl_target": 0.01}), seed=0)
    assert policy.update_kl(0.03) == pytest.approx(0.3)
    assert policy.update_kl(0.015) == pytest.approx(0.3)
    assert policy.update_kl(0.004) == pytest.approx(0.15)
    assert policy.get_state()["kl_coeff"] == pytest.approx(0.15)
    other = PPOPolicy(OBS_SPACE, ACT_SPACE, ppo({}), seed=0)
    other.set_state(policy.get_state())
    assert other.kl_coeff == pytest.approx(0.15)


# -- config -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"lr": -1.0}, "lr=-1.0"),
        ({"gamma": 1.5}, "gamma=1.5"),
        ({"grad_clip": 0.0}, "grad_clip=0.0"),
        ({"num_torch_threads": 0}, "num_torch_threads=0"),
        ({"model": {"hiden": (8,)}}, "PPOConfig.model has no field 'hiden'"),
        ({"model": {"activation": "swish"}}, "activation='swish'"),
        ({"clip_param": 0.0}, "clip_param=0.0"),
    ],
)
def test_bad_config_is_rejected(config: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        PPOPolicy(OBS_SPACE, ACT_SPACE, ppo(config))
    assert needle in str(info.value)


def test_unsupported_action_space_names_it() -> None:
    space = gym.spaces.MultiBinary(2)
    with pytest.raises(ConfigError) as info:
        PGPolicy(OBS_SPACE, space, pg({}))
    assert str(space) in str(info.value)


def test_threads_and_num_params() -> None:
    policy = PGPolicy(OBS_SPACE, ACT_SPACE, pg({"model": {"hidden": (8,)}}), seed=0)
    assert torch.get_num_threads() == 1
    assert policy.num_params() == (4 * 8 + 8 + 8 * 3 + 3) + (4 * 8 + 8 + 8 + 1)

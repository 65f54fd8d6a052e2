"""Tests for rlflow.policy.impala: sequence cutting, V-trace wiring, APPO's target network."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow.algorithms.actor_learner.policy import sequence_ends
from rlflow.algorithms.appo import APPOConfig
from rlflow.algorithms.appo.policy import APPOPolicy
from rlflow.algorithms.impala import IMPALAConfig
from rlflow.algorithms.impala.policy import VTracePolicy
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    EPS_ID,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.testing.envs import CountingEnv
from rlflow.vtrace import vtrace
from rlflow.workers import RolloutWorker

pytestmark = pytest.mark.timeout(120)

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)
ACT_SPACE = gym.spaces.Discrete(2)
GAMMA = 0.9
# No gradient clipping: the setting these tests were written for.
CONFIG: dict[str, Any] = {"gamma": GAMMA, "lr": 0.01, "model": {"hidden": (8,)}, "grad_clip": None}

# Three sequences, as a worker with 2 sub-envs writes them: env A's 4 steps of episode 1 (cut
# by the fragment's end), then env B's episode 2 ending after 2 steps and episode 3's first step.
EPS = [1, 1, 1, 1, 2, 2, 3]
TERMINATED = [0, 0, 0, 0, 0, 1, 0]
SEGMENTS = [(0, 4), (4, 6), (6, 7)]


def _batch(policy: VTracePolicy, *, on_policy: bool, seed: int = 0) -> SampleBatch:
    """The tiny batch above; behaviour log-probs are the policy's own when ``on_policy``."""
    rng = np.random.default_rng(seed)
    n = len(EPS)
    obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    next_obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    for a, b in SEGMENTS:
        next_obs[a : b - 1] = obs[a + 1 : b]
    actions = rng.integers(0, 2, n)
    with torch.no_grad():
        dist_inputs, _ = policy.model(torch.from_numpy(obs))
        own_logp = policy.dist_class(dist_inputs).logp(torch.from_numpy(actions)).numpy()
    logp = own_logp if on_policy else own_logp + rng.normal(0.0, 0.5, n).astype(np.float32)
    return SampleBatch(
        {
            OBS: obs,
            NEXT_OBS: next_obs,
            ACTIONS: actions,
            REWARDS: rng.uniform(0, 1, n).astype(np.float32),
            TERMINATEDS: np.array(TERMINATED, dtype=bool),
            TRUNCATEDS: np.zeros(n, dtype=bool),
            EPS_ID: np.array(EPS, dtype=np.int64),
            LOGP: logp.astype(np.float32),
            ACTION_DIST_INPUTS: dist_inputs.numpy(),
        }
    )


def _learner_view(policy: VTracePolicy, batch: SampleBatch) -> tuple[np.ndarray, ...]:
    """The learner's log pi(a|x), V(x) per row and V(next_obs) per row, by hand."""
    with torch.no_grad():
        dist_inputs, values = policy.model(torch.from_numpy(batch[OBS]))
        logp = policy.dist_class(dist_inputs).logp(torch.from_numpy(batch[ACTIONS]))
        next_values = policy.model.value(torch.from_numpy(batch[NEXT_OBS]))
    return logp.numpy(), values.numpy(), next_values.numpy()


# ------------------------------------------------------------------------------ sequences
def test_sequence_ends_cut_at_episode_ends_env_changes_and_gaps() -> None:
    obs = np.array([[0], [1], [2], [7], [8], [3]], dtype=np.float32)
    next_obs = np.array([[1], [2], [3], [8], [9], [4]], dtype=np.float32)
    eps = [1, 1, 1, 2, 2, 1]
    term = [0, 0, 0, 0, 0, 0]
    trunc = [0, 1, 0, 0, 0, 0]
    # Row 1 truncated; row 2 -> 3 changes episode; row 4 -> 5 changes episode although row 5
    # continues episode 1 in time (it came from a later fragment); the last row always ends.
    assert sequence_ends(obs, next_obs, eps, term, trunc).tolist() == [
        False,
        True,
        True,
        False,
        True,
        True,
    ]
    # Same episode id but next_obs does not match: not consecutive in time.
    assert sequence_ends([[0], [5]], [[1], [6]], [1, 1], [0, 0], [0, 0]).tolist() == [True, True]
    # Adjacent fragments of one episode (e.g. two samples of a 1-env worker) are joined.
    assert sequence_ends([[0], [1]], [[1], [2]], [1, 1], [0, 0], [0, 0]).tolist() == [False, True]


def test_worker_batches_carry_next_obs_and_cut_into_sub_env_fragments() -> None:
    config = IMPALAConfig(
        env=CountingEnv,
        env_config={"episode_len": 3},
        num_envs_per_worker=2,
        rollout_fragment_length=4,
        model={"hidden": (8,)},
    )
    batch = RolloutWorker(config, VTracePolicy, worker_index=1).sample()
    assert NEXT_OBS in batch
    ends = sequence_ends(
        batch[OBS], batch[NEXT_OBS], batch[EPS_ID], batch[TERMINATEDS], batch[TRUNCATEDS]
    )
    # Per sub-env: steps 1-3 (terminated), then step 1 of the next episode (fragment end).
    assert ends.tolist() == [False, False, True, True] * 2


# ------------------------------------------------------------------------------ V-trace loss
def test_vtrace_targets_match_rlflow_vtrace_per_sequence() -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG), seed=0)
    batch = _batch(policy, on_policy=False)
    logp, values, next_values = _learner_view(policy, batch)
    got = policy.compute_vtrace(batch, logp, values)
    discounts = GAMMA * (1.0 - batch[TERMINATEDS].astype(np.float64))
    for a, b in SEGMENTS:
        bootstrap = 0.0 if batch[TERMINATEDS][b - 1] else next_values[b - 1]
        want = vtrace(
            batch[LOGP][a:b].astype(np.float64),
            logp[a:b],
            batch[REWARDS][a:b],
            values[a:b],
            bootstrap,
            discounts[a:b],
        )
        np.testing.assert_allclose(got.vs[a:b], want.vs, rtol=1e-5)
        np.testing.assert_allclose(got.pg_advantages[a:b], want.pg_advantages, rtol=1e-5)
    assert not np.allclose(got.rhos, 1.0)  # the batch is really off-policy


def test_loss_is_policy_gradient_plus_value_regression_minus_entropy() -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG, entropy_coeff=0.1), seed=0)
    batch = _batch(policy, on_policy=False)
    logp, values, _ = _learner_view(policy, batch)
    vt = policy.compute_vtrace(batch, logp, values)
    total, stats = policy.loss(policy.batch_to_tensors(batch))
    policy_loss = -np.mean(logp * vt.pg_advantages)
    vf_loss = 0.5 * np.mean((values - vt.vs) ** 2)
    assert stats["policy_loss"] == pytest.approx(policy_loss, rel=1e-5)
    assert stats["vf_loss"] == pytest.approx(vf_loss, rel=1e-5)
    want = policy_loss + 0.5 * vf_loss - 0.1 * stats["entropy"]
    assert float(total.detach()) == pytest.approx(want, rel=1e-5)
    # The targets are constants: the value gradient is that of 0.5 * mean((V - vs)^2) alone.
    policy.model.zero_grad()
    total.backward()
    assert all(p.grad is not None for p in policy.model.parameters())


def test_on_policy_value_targets_are_n_step_bootstrapped_returns() -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG), seed=1)
    batch = _batch(policy, on_policy=True, seed=1)
    logp, values, next_values = _learner_view(policy, batch)
    got = policy.compute_vtrace(batch, logp, values)
    np.testing.assert_allclose(got.rhos, 1.0, rtol=1e-6)
    rewards = batch[REWARDS].astype(np.float64)
    for a, b in SEGMENTS:
        bootstrap = 0.0 if batch[TERMINATEDS][b - 1] else float(next_values[b - 1])
        for t in range(a, b):
            ret = sum(GAMMA ** (k - t) * rewards[k] for k in range(t, b))
            ret += GAMMA ** (b - t) * bootstrap
            assert got.vs[t] == pytest.approx(ret, rel=1e-5), (t, a, b)


def test_missing_next_obs_is_a_config_error() -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG), seed=0)
    batch = _batch(policy, on_policy=True)
    del batch[NEXT_OBS]
    with pytest.raises(ConfigError, match="next_obs"):
        policy.loss(policy.batch_to_tensors(batch))


def test_minibatches_are_contiguous_slices_in_shuffled_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG), seed=0)
    batch = _batch(policy, on_policy=True)
    seen: list[list[int]] = []

    def record(minibatch: Mapping[str, Any]) -> dict[str, float]:
        seen.append(minibatch[EPS_ID].tolist())
        return {"x": 1.0}

    monkeypatch.setattr(policy, "learn_on_batch", record)
    stats = policy.learn_on_minibatches(
        batch, num_sgd_iter=2, sgd_minibatch_size=3, rng=np.random.default_rng(0)
    )
    assert stats == {"x": 1.0, "num_steps": 6.0}
    slices = [EPS[0:3], EPS[3:6], EPS[6:7]]
    assert sorted(seen[:3]) == sorted(slices) and sorted(seen[3:]) == sorted(slices)


# ------------------------------------------------------------------------------ APPO
def test_appo_target_network_and_surrogate() -> None:
    policy = APPOPolicy(OBS_SPACE, ACT_SPACE, APPOConfig(**CONFIG, use_kl_loss=True), seed=0)
    batch = _batch(policy, on_policy=True)
    # pi == pi_target == mu: the ratio is 1, nothing is clipped, the KL is 0.
    _, stats = policy.loss(policy.batch_to_tensors(batch))
    assert stats["clip_frac"] == 0.0
    assert stats["kl"] == pytest.approx(0.0, abs=1e-6)

    def same_as_target() -> bool:
        target = policy.target_model.state_dict()
        return all(torch.equal(v, target[k]) for k, v in policy.model.state_dict().items())

    for _ in range(3):
        policy.learn_on_batch(batch)
    assert not same_as_target()
    state = policy.get_state()
    policy.update_target()
    assert same_as_target()
    policy.set_state(state)  # restores the stale target too
    assert not same_as_target()
    assert all(not p.requires_grad for p in policy.target_model.parameters())

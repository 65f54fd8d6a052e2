"""Tests for rlflow.policy.impala: sequence cutting, V-trace wiring, APPO's target network."""

from __future__ import annotations

import itertools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow.algorithms.appo import APPOConfig
from rlflow.algorithms.appo.policy import APPOPolicy
from rlflow.algorithms.impala import IMPALAConfig
from rlflow.algorithms.impala.policy import VTracePolicy
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    BOOTSTRAP,
    EPS_ID,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    SEQ_START,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
)
from rlflow.data.sequences import cut_sequences
from rlflow.errors import ConfigError
from rlflow.learner import stats_to_host
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
# by the fragment's end), then env B's episode 2 ending after 2 steps and episode 3's first
# step; each closed by its bootstrap row (so the rows are 4 + 1, 2 + 1, 1 + 1).
EPS = [1, 1, 1, 1, 2, 2, 3]
TERMINATED = [0, 0, 0, 0, 0, 1, 0]
SEGMENTS = [(0, 4), (4, 6), (6, 7)]  # step indexes, bootstrap rows left out
ROWS = [(0, 5), (5, 8), (8, 10)]  # the same sequences' rows in the batch


def _batch(policy: VTracePolicy, *, on_policy: bool, seed: int = 0) -> SampleBatch:
    """The tiny sequence batch above; behaviour log-probs are the policy's own when
    ``on_policy``."""
    rng = np.random.default_rng(seed)
    n = len(EPS)
    obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    bootstrap_obs = rng.uniform(-1, 1, (len(SEGMENTS), 3)).astype(np.float32)
    actions = rng.integers(0, 2, n)
    with torch.no_grad():
        dist_inputs, _ = policy.model(torch.from_numpy(obs))
        own_logp = policy.dist_class(dist_inputs).logp(torch.from_numpy(actions)).numpy()
    logp = own_logp if on_policy else own_logp + rng.normal(0.0, 0.5, n).astype(np.float32)
    steps = SampleBatch(
        {
            OBS: obs,
            ACTIONS: actions,
            REWARDS: rng.uniform(0, 1, n).astype(np.float32),
            TERMINATEDS: np.array(TERMINATED, dtype=bool),
            TRUNCATEDS: np.zeros(n, dtype=bool),
            EPS_ID: np.array(EPS, dtype=np.int64),
            LOGP: logp.astype(np.float32),
            ACTION_DIST_INPUTS: dist_inputs.numpy(),
        }
    )
    return SampleBatch.concat_samples(
        [
            cut_sequences(steps.slice(a, b), max_seq_len=None, bootstrap_obs=ob)
            for (a, b), ob in zip(SEGMENTS, bootstrap_obs)
        ]
    )


def _learner_view(policy: VTracePolicy, batch: SampleBatch) -> tuple[np.ndarray, ...]:
    """The learner's log pi(a|x) and V(x) per row (bootstrap rows included), by hand."""
    with torch.no_grad():
        dist_inputs, values = policy.model(torch.from_numpy(batch[OBS]))
        logp = policy.dist_class(dist_inputs).logp(torch.from_numpy(batch[ACTIONS]))
    return logp.numpy(), values.numpy()


def _per_step(policy: VTracePolicy, batch: SampleBatch, on: str = "vs") -> list[np.ndarray]:
    """compute_vtrace's targets ``on`` per sequence, in time order (padding dropped)."""
    logp, values = _learner_view(policy, batch)
    tensors = policy.update.batch_to_tensors(batch)
    vt = policy.compute_vtrace(tensors, torch.from_numpy(logp), torch.from_numpy(values))
    grid, mask = getattr(vt, on).numpy(), vt.mask.numpy().astype(bool)
    return [grid[:, b][mask[:, b]] for b in range(grid.shape[1])]


# ------------------------------------------------------------------------------ sequences
def test_worker_batches_are_sequences_closed_by_bootstrap_rows() -> None:
    config = IMPALAConfig(
        env=CountingEnv,
        env_config={"episode_len": 3},
        num_envs_per_worker=2,
        rollout_fragment_length=4,
        model={"hidden": (8,)},
    )
    batch = RolloutWorker(config, VTracePolicy, worker_index=1).sample()
    assert NEXT_OBS not in batch
    # Per sub-env: steps 1-3 (terminated; its bootstrap row repeats the last observation, a
    # placeholder), then step 1 of the next episode, bootstrapped from the observation after it.
    assert batch[OBS].ravel().tolist() == [0.0, 1.0, 2.0, 2.0, 0.0, 1.0] * 2
    assert batch[BOOTSTRAP].tolist() == [False, False, False, True, False, True] * 2
    assert batch[TERMINATEDS].tolist() == [False, False, True, False, False, False] * 2
    assert batch.env_steps() == 8 and batch.count == 12


def test_a_truncated_sequence_bootstraps_from_the_episode_s_last_observation() -> None:
    config = IMPALAConfig(
        env=CountingEnv,
        env_config={"episode_len": 2, "truncate": True},
        rollout_fragment_length=3,
        model={"hidden": (8,)},
    )
    batch = RolloutWorker(config, VTracePolicy, worker_index=1).sample()
    # Steps 1-2 truncated: bootstrapped from observation 2 (not the reset's 0); then step 1.
    assert batch[OBS].ravel().tolist() == [0.0, 1.0, 2.0, 0.0, 1.0]
    assert batch[BOOTSTRAP].tolist() == [False, False, True, False, True]


# ------------------------------------------------------------------------------ V-trace loss
def test_vtrace_targets_match_rlflow_vtrace_per_sequence() -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG), seed=0)
    batch = _batch(policy, on_policy=False)
    logp, values = _learner_view(policy, batch)
    vs, adv = _per_step(policy, batch, "vs"), _per_step(policy, batch, "pg_advantages")
    for k, (a, b) in enumerate(ROWS):
        last = b - 2  # the sequence's last step; b - 1 is its bootstrap row
        bootstrap = 0.0 if batch[TERMINATEDS][last] else values[b - 1]
        steps = slice(a, b - 1)
        want = vtrace(
            batch[LOGP][steps].astype(np.float64),
            logp[steps],
            batch[REWARDS][steps],
            values[steps],
            bootstrap,
            GAMMA * (1.0 - batch[TERMINATEDS][steps].astype(np.float64)),
        )
        np.testing.assert_allclose(vs[k], want.vs, rtol=1e-5)
        np.testing.assert_allclose(adv[k], want.pg_advantages, rtol=1e-5)
    rhos = np.concatenate(_per_step(policy, batch, "rhos"))
    assert not np.allclose(rhos, 1.0)  # the batch is really off-policy


def test_loss_is_policy_gradient_plus_value_regression_minus_entropy() -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG, entropy_coeff=0.1), seed=0)
    batch = _batch(policy, on_policy=False)
    logp, values = _learner_view(policy, batch)
    steps = ~batch[BOOTSTRAP]  # per-row values in row order, bootstrap rows dropped
    vs = np.concatenate(_per_step(policy, batch, "vs"))
    adv = np.concatenate(_per_step(policy, batch, "pg_advantages"))
    total, stats = policy.loss(policy.update.batch_to_tensors(batch))
    stats = stats_to_host(stats)
    policy_loss = -np.mean(logp[steps] * adv)
    vf_loss = 0.5 * np.mean((values[steps] - vs) ** 2)
    assert stats["policy_loss"] == pytest.approx(policy_loss, rel=1e-5)
    assert stats["vf_loss"] == pytest.approx(vf_loss, rel=1e-5)
    want = policy_loss + 0.5 * vf_loss - 0.1 * stats["entropy"]
    assert float(total.detach()) == pytest.approx(want, rel=1e-5)
    # The targets are constants: the value gradient is that of 0.5 * mean((V - vs)^2) alone.
    policy.model.zero_grad()
    total.backward()
    assert all(p.grad is not None for p in policy.model.parameters())


def test_learn_on_batch_returns_host_floats_once_per_call() -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG), seed=0)
    stats = policy.update.learn_on_batch(_batch(policy, on_policy=True))
    want = {"policy_loss", "vf_loss", "entropy", "mean_rho", "mean_vs", "total_loss", "grad_gnorm"}
    assert want <= set(stats) and all(type(stats[k]) is float for k in want)
    assert stats["mean_rho"] == pytest.approx(1.0, rel=1e-6)


def test_on_policy_value_targets_are_n_step_bootstrapped_returns() -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG), seed=1)
    batch = _batch(policy, on_policy=True, seed=1)
    _, values = _learner_view(policy, batch)
    vs = _per_step(policy, batch, "vs")
    np.testing.assert_allclose(np.concatenate(_per_step(policy, batch, "rhos")), 1.0, rtol=1e-6)
    rewards = batch[REWARDS].astype(np.float64)
    for k, (a, b) in enumerate(ROWS):
        end = b - 1  # the bootstrap row
        bootstrap = 0.0 if batch[TERMINATEDS][end - 1] else float(values[end])
        for t in range(a, end):
            ret = sum(GAMMA ** (j - t) * rewards[j] for j in range(t, end))
            ret += GAMMA ** (end - t) * bootstrap
            assert vs[k][t - a] == pytest.approx(ret, rel=1e-5), (t, a, b)


def test_a_batch_without_bootstrap_rows_is_a_config_error() -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG), seed=0)
    batch = _batch(policy, on_policy=True)
    del batch[BOOTSTRAP]  # sequences that nothing closes
    with pytest.raises(ConfigError, match=r"closed by a bootstrap row.*requires_bootstrap_rows"):
        policy.update.learn_on_batch(batch)
    # A cut inside a sequence (its last row is a step) is refused too.
    with pytest.raises(ConfigError, match="closed by a bootstrap row"):
        policy.update.learn_on_batch(_batch(policy, on_policy=True).slice(0, 3))
    del batch[SEQ_START]  # no sequences at all
    with pytest.raises(ConfigError, match="V-trace learns on sequence batches"):
        policy.update.learn_on_batch(batch)


def test_minibatches_are_whole_sequences_in_shuffled_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = VTracePolicy(OBS_SPACE, ACT_SPACE, IMPALAConfig(**CONFIG), seed=0)
    batch = _batch(policy, on_policy=True)
    rows = {int(e): int(n) for e, n in zip(*np.unique(batch[EPS_ID], return_counts=True))}
    assert rows == {1: 5, 2: 3, 3: 2}  # sequences of 4, 2 and 1 steps, each with its bootstrap
    seen: list[list[int]] = []
    loss = policy.loss

    def record(tensors: dict[str, torch.Tensor]) -> Any:
        seen.append(tensors[EPS_ID].tolist())
        return loss(tensors)

    monkeypatch.setattr(policy, "loss", record)
    stats = policy.update.learn_on_minibatches(
        batch, num_sgd_iter=3, sgd_minibatch_size=3, rng=np.random.default_rng(0)
    )
    # 7 steps: two minibatches an epoch, the k-th ending with the sequence that brings the
    # epoch's env steps (bootstrap rows left out) to 3 * k; the rest waits for another order.
    assert stats["num_steps"] == 6.0 and len(seen) == 6
    for k, ids in enumerate(seen):
        sequences = list(dict.fromkeys(ids))
        assert [e for e, _ in itertools.groupby(ids)] == sequences  # each whole, in one run
        assert all(ids.count(e) == rows[e] for e in sequences)
        epoch = seen[k - k % 2 : k + 1]
        assert sum(rows[e] - 1 for ids_ in epoch for e in set(ids_)) >= 3 * (k % 2 + 1)
    epochs = [tuple(dict.fromkeys(seen[k] + seen[k + 1])) for k in (0, 2, 4)]
    assert len(set(epochs)) > 1  # each epoch draws its own order


# ------------------------------------------------------------------------------ APPO
def test_appo_target_network_and_surrogate() -> None:
    policy = APPOPolicy(OBS_SPACE, ACT_SPACE, APPOConfig(**CONFIG, use_kl_loss=True), seed=0)
    batch = _batch(policy, on_policy=True)
    # pi == pi_target == mu: the ratio is 1, nothing is clipped, the KL is 0.
    stats = stats_to_host(policy.loss(policy.update.batch_to_tensors(batch))[1])
    assert stats["clip_frac"] == 0.0
    assert stats["kl"] == pytest.approx(0.0, abs=1e-6)

    def same_as_target() -> bool:
        target = policy.target_model.state_dict()
        return all(torch.equal(v, target[k]) for k, v in policy.model.state_dict().items())

    for _ in range(3):
        policy.update.learn_on_batch(batch)
    assert not same_as_target()
    state = policy.get_state()
    policy.update_target()
    assert same_as_target()
    policy.set_state(state)  # restores the stale target too
    assert not same_as_target()
    assert all(not p.requires_grad for p in policy.target_model.parameters())

"""The sampler's GAE of a whole rollout at once gives the per-fragment postprocessing's batch."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest

from rlflow.algorithms import PPOConfig
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.data import ADVANTAGES, SampleBatch
from rlflow.returns import gae, gae_columns
from rlflow.workers import RolloutWorker

pytestmark = pytest.mark.timeout(120)


class PerFragmentPPOPolicy(PPOPolicy):
    """PPO's policy, made to postprocess each episode fragment on its own."""

    def gae_parameters(self) -> tuple[float, float] | None:
        return None


def _short_cartpole() -> gym.Env:
    # Truncations every 13 steps at most: fragments end by termination, truncation and cut.
    return gym.make("CartPole-v1", max_episode_steps=13)


def _batches(policy_cls: type[PPOPolicy], num_envs: int, fragment: int) -> list[SampleBatch]:
    config = PPOConfig(
        env=_short_cartpole,
        num_workers=0,
        num_envs_per_worker=num_envs,
        rollout_fragment_length=fragment,
        seed=11,
    )
    worker = RolloutWorker(config, policy_cls, worker_index=1)
    batches = [worker.sample() for _ in range(3)]
    worker.stop()
    return batches


@pytest.mark.parametrize(("num_envs", "fragment"), [(1, 40), (6, 25)])
def test_whole_rollout_gae_gives_the_per_fragment_batch(num_envs: int, fragment: int) -> None:
    assert PPOPolicy.gae_parameters is not PerFragmentPPOPolicy.gae_parameters
    fast = _batches(PPOPolicy, num_envs, fragment)
    slow = _batches(PerFragmentPPOPolicy, num_envs, fragment)
    for a, b in zip(fast, slow, strict=True):
        assert list(a) == list(b)  # the same columns, in the same order
        for name in a:
            assert a[name].dtype == b[name].dtype, name
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        assert np.any(a[ADVANTAGES] != 0)


def _engine_batches(policy_cls: type[PPOPolicy], engine: str) -> list[SampleBatch]:
    config = PPOConfig(
        env="CartPole-v1",
        env_config={"max_episode_steps": 13},
        num_workers=0,
        num_envs_per_worker=5,
        rollout_fragment_length=30,
        vector_env=engine,
        seed=11,
    )
    worker = RolloutWorker(config, policy_cls, worker_index=1)
    batches = [worker.sample() for _ in range(3)]
    worker.stop()
    return batches


@pytest.mark.parametrize(
    "engine",
    [
        "gymnasium",
        pytest.param(
            "envpool",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("envpool") is None, reason="envpool is not installed"
            ),
        ),
    ],
)
def test_whole_rollout_gae_leaves_out_a_next_step_engines_reset_rows(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each episode end is followed by the engine's reset row, dropped: the whole-rollout GAE
    # gives what postprocessing each episode fragment on its own gives, without those rows.
    from rlflow.workers.vector_sampler import VectorSampler

    calls = []
    whole = VectorSampler._postprocess_gae

    def counted(self: VectorSampler, *args: object) -> SampleBatch:
        calls.append(1)
        return whole(self, *args)

    monkeypatch.setattr(VectorSampler, "_postprocess_gae", counted)
    fast = _engine_batches(PPOPolicy, engine)
    assert len(calls) == 3  # every fragment took the whole-rollout path
    slow = _engine_batches(PerFragmentPPOPolicy, engine)
    for a, b in zip(fast, slow, strict=True):
        assert a.count < 5 * 30  # reset rows were left out
        assert list(a) == list(b)
        for name in a:
            assert a[name].dtype == b[name].dtype, name
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_gae_columns_is_gae_of_each_fragment_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    shape = (30, 4)
    rewards = rng.standard_normal(shape).astype(np.float32)
    values = rng.standard_normal(shape).astype(np.float32)
    terminated = rng.random(shape) < 0.1
    ends = terminated | (rng.random(shape) < 0.1)
    ends[-1] = True
    boot = np.where(terminated, 0.0, rng.standard_normal(shape)).astype(np.float32)
    result = gae_columns(rewards, values, ends, boot, gamma=0.99, lam=0.9)
    for i in range(shape[1]):
        start = 0
        for end in np.flatnonzero(ends[:, i]):
            part = slice(start, end + 1)
            one = gae(
                rewards[part, i].astype(np.float64),
                values[part, i],
                bootstrap_value=float(boot[end, i]),
                gamma=0.99,
                lam=0.9,
            )
            assert one.advantages.astype(np.float32).tobytes() == (
                result.advantages[part, i].tobytes()
            )
            assert one.value_targets.astype(np.float32).tobytes() == (
                result.value_targets[part, i].tobytes()
            )
            start = end + 1


def test_gae_columns_needs_every_fragment_closed_at_the_last_row() -> None:
    ones = np.ones((3, 2), np.float32)
    ends = np.zeros((3, 2), bool)
    with pytest.raises(Exception, match="last row must end"):
        gae_columns(ones, ones, ends, ones, gamma=0.9, lam=0.9)

"""PPO's ``sample_ahead``: workers sample the next round while the learner trains; each batch is
then exactly one train step's updates old, on either backend."""

from __future__ import annotations

import pytest

from rlflow.errors import ConfigError
from rlflow.trainer import Trainer

pytestmark = pytest.mark.timeout(180)

# 2 workers x 2 envs x 16 steps = one 64-step round per train batch; 2 epochs of 2 minibatches.
FIELDS = {
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 16,
    "train_batch_size": 64,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 2,
    "min_steps_per_iteration": 0,
}
UPDATES_PER_BATCH = 4


def _lags(backend: str, *, ahead: bool) -> list[tuple[float, float]]:
    with Trainer("ppo", backend=backend, sample_ahead=ahead, **FIELDS) as trainer:
        results = [trainer.train() for _ in range(4)]
    return [(r["policy_lag_mean"], r["policy_lag_max"]) for r in results]


def test_sample_ahead_batches_are_one_train_step_old(backend: str) -> None:
    assert _lags(backend, ahead=False) == [(0.0, 0.0)] * 4
    # The first two rounds are both sampled with the initial weights.
    later = [(float(UPDATES_PER_BATCH), float(UPDATES_PER_BATCH))] * 3
    assert _lags(backend, ahead=True) == [(0.0, 0.0), *later]


def test_sample_ahead_must_be_a_bool() -> None:
    with pytest.raises(ConfigError, match=r"PPOConfig.sample_ahead=1 must be True or False"):
        Trainer("ppo", backend="local", sample_ahead=1)

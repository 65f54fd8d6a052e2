"""DreamerV3 on Ray: remote rollout workers carry the RSSM state and act with the learner's
weights (the plan's weight push), with a small model and replay."""

from __future__ import annotations

import numpy as np
import pytest

from rlflow import flow
from rlflow.testing.envs import CountingEnv
from rlflow.trainer import Trainer

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


def test_two_remote_workers_feed_the_learner_and_get_its_weights(ray_backend: None) -> None:
    trainer = Trainer(
        "dreamerv3",
        env=CountingEnv,
        env_config={"episode_len": 5},
        backend="ray",
        num_workers=2,
        seed=0,
        learning_starts=16,
        rollout_fragment_length=8,
        min_steps_per_iteration=32,
        batch_size=2,
        batch_length=4,
        imagination_horizon=2,
        train_ratio=4.0,
    )
    try:
        first = trainer.train()
        second = trainer.train()
        assert second["num_env_steps_sampled"] > first["num_env_steps_sampled"] >= 32
        assert second["counters"]["num_train_steps"] > 0
        assert second["num_healthy_workers"] == 2
        learner = trainer.workers.local_worker().get_weights()
        for worker in trainer.workers.remote_workers():
            remote = flow.get(worker.get_weights.remote())
            for policy_id, weights in learner.items():
                for name, value in weights.items():
                    np.testing.assert_array_equal(remote[policy_id][name], value, err_msg=name)
    finally:
        trainer.stop()

"""The replay family's config -> replay objects: the shards of a distributed replay plan."""

from __future__ import annotations

import pytest

from rlflow.algorithms import ApexConfig
from rlflow.algorithms.q_learning.replay import replay_shard_spec
from rlflow.replay import ReplayShardSpec

pytestmark = pytest.mark.timeout(30)


def test_the_shard_spec_comes_from_the_replay_settings_of_the_config() -> None:
    config = ApexConfig(
        env="CartPole-v1",
        buffer_size=1000,
        learning_starts=100,
        train_batch_size=16,
        prioritized_replay_alpha=0.5,
        prioritized_replay_beta=0.3,
        num_replay_buffer_shards=3,
        seed=4,
    )
    assert replay_shard_spec(config, config.num_replay_buffer_shards) == ReplayShardSpec(
        num_shards=3,
        capacity=1000,
        prioritized=True,
        alpha=0.5,
        beta=0.3,
        learning_starts=100,
        num_items=16,
        seed=4,
    )
    uniform = ApexConfig(env="CartPole-v1", prioritized_replay=False, seed=None)
    spec = replay_shard_spec(uniform, 2)
    assert not spec.prioritized and spec.seed is None and spec.num_shards == 2

"""`ApexConfig`: distributed prioritized experience replay settings (Horgan et al. 2018).

`ApexDataflowConfig` holds the Ape-X dataflow's own settings, whatever policy it trains:
`rlflow.algorithms.q_learning.config.ReplayAlgorithmConfig`'s fields (and groups),
`rlflow.config.learning.LearnerQueueConfig`, and replay shards, weight syncs, requests in
flight and ``intensity_slack``. `ApexConfig` is DQN's (`rlflow.algorithms.dqn.config.
DQNConfig`) on it; Ape-X TD3 (`rlflow.algorithms.apex_td3`) puts TD3's on it. Defaults: DQN's,
with Ape-X's own in the class statement below. Here ``num_workers`` must be >= 1,
``buffer_size`` and ``learning_starts`` count over all shards, and
``target_network_update_freq`` counts env steps *trained*.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.algorithms.q_learning.config import ReplayAlgorithmConfig
from rlflow.config.learning import LearnerQueueConfig

__all__ = ["ApexConfig", "ApexDataflowConfig"]


@dataclass(frozen=True, kw_only=True)
class ApexDataflowConfig(ReplayAlgorithmConfig, LearnerQueueConfig):
    """What Ape-X's plan (`rlflow.algorithms.apex.apex_plan`) reads, whatever the policy:
    sharded prioritized replay, asynchronous sampling and a learner thread.

    ``train_batch_size`` must be <= ``buffer_size / num_replay_buffer_shards``.
    """

    num_replay_buffer_shards: int = 2
    """Replay shards (actors, no CPU reserved), >= 1."""
    max_weight_sync_delay: int = 400
    """Push the learner's weights to a worker after it delivered this many env steps, >= 1."""
    num_async_replay_requests: int = 4
    """Replay requests in flight per shard, >= 1."""
    num_async_rollout_requests: int = 2
    """Sample requests in flight per worker, >= 1."""
    intensity_slack: int = 0
    """How far (replayed env steps) the ratio may drift from ``training_intensity`` before a
    side is held, >= 0; 0: two train batches or two sampling rounds' worth at
    ``training_intensity``, whichever is larger."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("num_workers", 1)
        self._check_int("num_replay_buffer_shards", 1)
        self._check_int("max_weight_sync_delay", 1)
        self._check_int("num_async_replay_requests", 1)
        self._check_int("num_async_rollout_requests", 1)
        per_shard = self.buffer_size // self.num_replay_buffer_shards
        if per_shard < self.train_batch_size:
            raise self._bad(
                "buffer_size",
                f"must hold train_batch_size={self.train_batch_size} transitions per shard "
                f"({self.num_replay_buffer_shards} shards get {per_shard} each)",
            )
        self._check_int("intensity_slack", 0)


@dataclass(frozen=True, kw_only=True)
class ApexConfig(
    DQNConfig,
    ApexDataflowConfig,
    defaults={
        "num_workers": 2,
        "num_envs_per_worker": 4,
        "rollout_fragment_length": 50,
        "train_batch_size": 512,
        "buffer_size": 200_000,
        "learning_starts": 5000,
        "target_network_update_freq": 50_000,
        "n_step": 3,
        "lr": 1e-4,
        "per_worker_exploration": True,
        "worker_side_prioritization": True,
    },
):
    """Ape-X DQN: many workers with fixed per-worker epsilons, sharded prioritized replay,
    a learner thread, and workers that compute their transitions' initial priorities.

    ``train_batch_size`` must be <= ``buffer_size / num_replay_buffer_shards``.
    """

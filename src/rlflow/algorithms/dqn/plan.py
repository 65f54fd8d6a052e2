"""The DQN plan: store rollouts in a replay buffer and train on replayed batches, in turn.

Liang et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow Problem"
(NeurIPS 2021), Fig. 7 (DQN), written out in `rlflow.ops.off_policy.store_and_replay` (SAC and
TD3 run on it too, as in RLlib)::

    store_op:  (1) parallel_rollouts(bulk_sync) -> (2) StoreToReplayBuffer
    replay_op: (3) replay(learning_starts) -> (4) TrainOneStep -> (5) UpdateReplayPriorities
               -> (6) UpdateTargetNetwork(target_network_update_freq)
    (7) concurrently(store_op, replay_op; round robin, weights from training_intensity,
        output of replay_op only) -> (8) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.flow import LocalIterator
from rlflow.ops import standard_metrics_reporting
from rlflow.ops.off_policy import store_and_replay
from rlflow.workers import WorkerSet

__all__ = ["dqn_plan"]


def dqn_plan(workers: WorkerSet, config: DQNConfig) -> LocalIterator[dict[str, Any]]:
    """Build the DQN plan over ``workers``; each item is one iteration's result dict."""
    # (1)-(7) Sample into the buffer and train the Q network on replayed batches, in turn.
    train_op = store_and_replay(workers, config)
    # (8) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)

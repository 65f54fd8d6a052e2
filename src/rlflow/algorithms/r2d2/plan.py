"""The R2D2 plan: DQN's (store rollouts, replay, train, update priorities and the target), its
buffer one of sequences.

`rlflow.algorithms.q_learning.replay.make_replay_buffer` builds a
`rlflow.replay.SequenceReplayBuffer` for a config with ``replay_sequence_length``: the
rollout workers' fragments (each closed by a bootstrap row, with the recurrent state of every
step) are stored as sequences, replayed by priority, and their priorities updated from the
learner's per-sequence `TD_ERROR`, all through DQN's operators unchanged::

    store_op:  parallel_rollouts(bulk_sync) -> StoreToReplayBuffer        (sequences folded)
    replay_op: replay(learning_starts) -> TrainOneStep -> UpdateReplayPriorities
               -> UpdateTargetNetwork(target_network_update_freq)
    concurrently(store_op, replay_op) -> standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.dqn.plan import dqn_plan
from rlflow.algorithms.r2d2.config import R2D2Config
from rlflow.flow import LocalIterator
from rlflow.workers import WorkerSet

__all__ = ["r2d2_plan"]


def r2d2_plan(workers: WorkerSet, config: R2D2Config) -> LocalIterator[dict[str, Any]]:
    """Build the R2D2 plan over ``workers``: DQN's, on a buffer of sequences."""
    return dqn_plan(workers, config)

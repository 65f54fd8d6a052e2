"""The QMIX plan: DQN's (store rollouts, replay, train, update the target), its buffer one of
the team's episode sequences.

The team is one agent of the grouped env, so its rows are whole team steps (every member's
observation and action, the global state, the team reward). `rlflow.algorithms.q_learning.
replay.make_replay_buffer` builds a `rlflow.replay.SequenceReplayBuffer` for a config with
``replay_sequence_length``: the rollout workers' fragments (cut into sequences of that many
steps, each closed by a bootstrap row, with the agents' GRU states) are stored one sequence per
item and replayed whole, through DQN's operators unchanged::

    store_op:  (1) parallel_rollouts(bulk_sync) -> (2) StoreToReplayBuffer (sequences folded)
    replay_op: (3) replay(learning_starts) -> (4) TrainOneStep (agents and mixer, one loss)
               -> (5) UpdateReplayPriorities -> (6) UpdateTargetNetwork(target_network_update_freq)
    (7) concurrently(store_op, replay_op; round robin) -> (8) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.dqn.plan import dqn_plan
from rlflow.algorithms.qmix.config import QMIXConfig
from rlflow.flow import LocalIterator
from rlflow.workers import WorkerSet

__all__ = ["qmix_plan"]


def qmix_plan(workers: WorkerSet, config: QMIXConfig) -> LocalIterator[dict[str, Any]]:
    """Build the QMIX plan over ``workers``: DQN's, on a buffer of the team's sequences."""
    return dqn_plan(workers, config)

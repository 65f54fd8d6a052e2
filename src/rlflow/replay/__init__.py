"""``rlflow.replay``: replay buffers (uniform, prioritized), n-step transitions, replay actors.

- `ReplayBuffer`, `PrioritizedReplayBuffer`: columnar ring storage of transitions;
  `SequenceReplayBuffer`: prioritized sequences (R2D2), folded as they are added;
  `replay_forever` turns one into a stream that yields None until ``learning_starts``.
- `n_step_transitions`: rollout fragment -> n-step transitions (`replay_transitions`: only
  the replayed columns).
- `ReplayShardSpec`, `ReplayActor`, `create_replay_actors`: a sharded buffer (its settings in
  one record) as parallel-iterator actors; `create_replay_shards` gives a `ReplayShardTable`,
  whose dead shards are recreated empty.
- `MultiAgentReplayBuffer`: one buffer per policy, for multi-agent runs.
- `SumSegmentTree`, `MinSegmentTree`: the trees behind prioritized sampling.
- `register_replay_buffer`, `ReplayShards`: a plan names its buffers for checkpoints
  (``checkpoint_replay_buffers``).
"""

from rlflow.replay.actors import (
    SHARD_STRIDE,
    ReplayActor,
    ReplayShardSpec,
    create_replay_actors,
    split_shard_indexes,
)
from rlflow.replay.buffers import (
    PrioritizedReplayBuffer,
    ReplayBuffer,
    SequenceReplayBuffer,
    replay_forever,
)
from rlflow.replay.checkpoint import (
    ReplayShards,
    register_replay_buffer,
    replay_buffer_states,
    replay_buffers,
    restore_replay_buffers,
)
from rlflow.replay.multi_agent import MultiAgentReplayBuffer
from rlflow.replay.n_step import DISCOUNTS, n_step_transitions, replay_transitions
from rlflow.replay.ring import BATCH_INDEXES, WEIGHTS
from rlflow.replay.segment_tree import MinSegmentTree, SumSegmentTree, next_power_of_two
from rlflow.replay.shards import ReplayShardTable, create_replay_shards

__all__ = [
    "BATCH_INDEXES",
    "DISCOUNTS",
    "SHARD_STRIDE",
    "WEIGHTS",
    "MinSegmentTree",
    "MultiAgentReplayBuffer",
    "PrioritizedReplayBuffer",
    "ReplayActor",
    "ReplayBuffer",
    "ReplayShardSpec",
    "ReplayShardTable",
    "ReplayShards",
    "SequenceReplayBuffer",
    "SumSegmentTree",
    "create_replay_actors",
    "create_replay_shards",
    "n_step_transitions",
    "next_power_of_two",
    "register_replay_buffer",
    "replay_buffer_states",
    "replay_buffers",
    "replay_forever",
    "replay_transitions",
    "restore_replay_buffers",
    "split_shard_indexes",
]

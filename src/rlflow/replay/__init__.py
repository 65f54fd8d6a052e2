"""``rlflow.replay``: replay buffers (uniform, prioritized), n-step transitions, replay actors.

- `ReplayBuffer`, `PrioritizedReplayBuffer`: columnar ring storage of transitions;
  `replay_forever` turns one into a stream that yields None until ``learning_starts``.
- `n_step_transitions`: rollout fragment -> n-step transitions; `LinearSchedule` for beta.
- `ReplayActor`, `create_replay_actors`: a sharded buffer as parallel-iterator actors.
- `MultiAgentReplayBuffer`: one buffer per policy, for multi-agent runs.
- `SumSegmentTree`, `MinSegmentTree`: the trees behind prioritized sampling.
"""

from rlflow.replay.actors import (
    SHARD_STRIDE,
    ReplayActor,
    create_replay_actors,
    split_shard_indexes,
)
from rlflow.replay.buffers import (
    BATCH_INDEXES,
    DISCOUNTS,
    WEIGHTS,
    LinearSchedule,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    n_step_transitions,
    replay_forever,
)
from rlflow.replay.multi_agent import MultiAgentReplayBuffer
from rlflow.replay.segment_tree import MinSegmentTree, SumSegmentTree, next_power_of_two

__all__ = [
    "BATCH_INDEXES",
    "DISCOUNTS",
    "SHARD_STRIDE",
    "WEIGHTS",
    "LinearSchedule",
    "MinSegmentTree",
    "MultiAgentReplayBuffer",
    "PrioritizedReplayBuffer",
    "ReplayActor",
    "ReplayBuffer",
    "SumSegmentTree",
    "create_replay_actors",
    "n_step_transitions",
    "next_power_of_two",
    "replay_forever",
    "split_shard_indexes",
]

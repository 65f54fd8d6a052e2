"""The replay-based family: what DQN, Ape-X, SAC and TD3 (and ppo_dqn's DQN learner) share.

- `rlflow.algorithms.q_learning.config`: :class:`ReplayAlgorithmConfig`, the replay settings
  (buffer, n-step, prioritized replay, target network, training intensity);
- `rlflow.algorithms.q_learning.replay`: a plan's local buffer, beta schedule and round-robin
  weights, built from that config.

The replay dataflow itself is DQN's plan (`rlflow.algorithms.dqn.plan.store_and_replay`).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.q_learning.config import ReplayAlgorithmConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.q_learning.replay import (
        beta_schedule,
        make_replay_buffer,
        training_intensity_weights,
    )

__all__ = [
    "ReplayAlgorithmConfig",
    "beta_schedule",
    "make_replay_buffer",
    "training_intensity_weights",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "beta_schedule": "replay",
        "make_replay_buffer": "replay",
        "training_intensity_weights": "replay",
    },
)

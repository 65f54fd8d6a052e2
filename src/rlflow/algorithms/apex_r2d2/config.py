"""`ApexR2D2Config`: R2D2's settings on Ape-X's dataflow (both configs' fields).

R2D2's (`rlflow.algorithms.r2d2.R2D2Config`: recurrent Q network, ``replay_sequence_length``,
``burn_in``, value rescaling, sequence priorities) and Ape-X's (`rlflow.algorithms.apex.
ApexConfig`: replay shards, weight syncs, requests in flight, the learner queue,
``training_intensity`` held). As in both, ``buffer_size``, ``learning_starts`` and
``train_batch_size`` count env steps (over all shards; a replayed batch is ``train_batch_size //
replay_sequence_length`` sequences), and ``target_network_update_freq`` counts env steps
trained. New sequences enter a shard at its highest priority (``worker_side_prioritization`` is
off, as R2D2 needs).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.apex.config import ApexConfig
from rlflow.algorithms.r2d2.config import R2D2Config

__all__ = ["ApexR2D2Config"]


@dataclass(frozen=True, kw_only=True)
class ApexR2D2Config(
    R2D2Config,
    ApexConfig,
    defaults={
        "num_workers": 2,
        "num_envs_per_worker": 4,
        "rollout_fragment_length": 20,
        "train_batch_size": 640,
        "buffer_size": 100_000,
        "learning_starts": 5000,
        "target_network_update_freq": 10_000,
        "n_step": 3,
        "lr": 1e-4,
        "per_worker_exploration": True,
        "worker_side_prioritization": False,
    },
):
    """R2D2 with Ape-X's sharded replay and learner thread (module docstring)."""

"""The source of plans that learn from recorded experience: :func:`offline_batches`.

It reads ``config.input`` (`rlflow.config.offline.OfflineConfig`) through
`rlflow.offline.read_experience`: ``num_input_readers`` reader shards, each shuffled per epoch
from ``config.seed``, gathered as they are ready (`READ_AHEAD` requests in flight per shard),
epoch after epoch. The rows read count as
sampled (``num_env_steps_sampled``), so ``min_steps_per_iteration`` and the step stops work as
in an online plan.
"""

from __future__ import annotations

from rlflow import flow
from rlflow.config import AlgorithmConfig
from rlflow.config.offline import experience_files
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError
from rlflow.offline import read_experience
from rlflow.ops.rollout import count_sampled

__all__ = ["READ_AHEAD", "offline_batches"]

READ_AHEAD = 4
"""Batches each reader shard is asked for ahead (``gather_async(num_async=)``), so a reader
actor decodes while the learner trains: BC on CartPole rows read by one reader actor on Ray
(2 cores, `benchmarks/offline_io.py`) trained 0.52 of its from-memory rate at 1 ahead, 0.77
at 4 and 0.82 at 8 (one run each)."""


def offline_batches(config: AlgorithmConfig) -> flow.LocalIterator[SampleBatch | MultiAgentBatch]:
    """Recorded batches of ``config.input``, endlessly (one per written sampled batch).

    `ConfigError` when ``input`` is ``"sampler"``: the plan needs recorded files."""
    if not config.reads_recorded():
        raise ConfigError(
            f"{type(config).__name__}.input='sampler': this algorithm learns from recorded "
            "experience; set input to a folder, glob or file list written with output=DIR"
        )
    files = experience_files(config.input, f"{type(config).__name__}.input")
    shards = read_experience(files, num_shards=config.num_input_readers, seed=config.seed)
    return shards.gather_async(num_async=READ_AHEAD).for_each(count_sampled)

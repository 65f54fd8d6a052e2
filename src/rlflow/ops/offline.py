"""The source of plans that learn from recorded experience: :func:`offline_batches`.

It reads ``config.input`` (`rlflow.config.offline.OfflineConfig`) through
`rlflow.offline.read_experience`: ``num_input_readers`` reader shards, each shuffled per epoch
from ``config.seed``, gathered as they are ready, epoch after epoch. The rows read count as
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

__all__ = ["offline_batches"]


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
    return shards.gather_async().for_each(count_sampled)

"""Where a plan's experience comes from: the rollout workers, recorded files, or a mix.

- :func:`offline_batches` reads recorded experience (``config.input``, or one path) through
  `rlflow.offline.read_experience`: ``num_input_readers`` reader shards, each shuffled per
  epoch from ``config.seed``, gathered as they are ready (`READ_AHEAD` requests in flight per
  shard), epoch after epoch. The rows read count as sampled (``num_env_steps_sampled``), so
  ``min_steps_per_iteration`` and the step stops work as in an online plan.
- :func:`experience` is the source of plans that can learn from either: ``config.input_mix``
  (each source's batches in turn, in its proportion), else recorded ``input``, else
  ``parallel_rollouts`` over the workers.
"""

from __future__ import annotations

import os
from typing import Literal

from rlflow import flow
from rlflow.config import AlgorithmConfig
from rlflow.config.offline import SAMPLER, experience_files
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError
from rlflow.offline import read_experience
from rlflow.offline.parquet import ExperienceFile
from rlflow.ops.concurrency import concurrently
from rlflow.ops.rollout import count_sampled, parallel_rollouts
from rlflow.workers import WorkerSet

__all__ = [
    "READ_AHEAD",
    "experience",
    "offline_batches",
    "recorded_rows_per_batch",
    "require_columns",
]

READ_AHEAD = 4
"""Batches each reader shard is asked for ahead (``gather_async(num_async=)``), so a reader
actor decodes while the learner trains: BC on CartPole rows read by one reader actor on Ray
(2 cores, `benchmarks/offline_io.py`) trained 0.52 of its from-memory rate at 1 ahead, 0.77
at 4 and 0.82 at 8 (one run each)."""

Batch = SampleBatch | MultiAgentBatch


def offline_batches(
    config: AlgorithmConfig, source: str | list[str] | None = None
) -> flow.LocalIterator[Batch]:
    """Recorded batches of ``source`` (default ``config.input``), endlessly (one per written
    sampled batch).

    `ConfigError` when ``config.input`` is ``"sampler"`` and no ``source`` is given: the plan
    needs recorded files."""
    name = type(config).__name__
    if source is None:
        if not config.reads_recorded() or config.input_mix is not None:
            raise ConfigError(
                f"{name}.input={config.input!r}: this plan learns from recorded experience; set "
                "input to a folder, glob or file list written with output=DIR"
            )
        source = config.input
    files = experience_files(source, f"{name}.input")
    shards = read_experience(files, num_shards=config.num_input_readers, seed=config.seed)
    return shards.gather_async(num_async=READ_AHEAD).for_each(count_sampled)


def experience(
    workers: WorkerSet,
    config: AlgorithmConfig,
    *,
    mode: Literal["bulk_sync", "async"] = "bulk_sync",
    recorded_only: bool = False,
) -> flow.LocalIterator[Batch]:
    """The experience a plan learns from (module docstring); the workers sample with ``mode``.

    With ``recorded_only`` (the offline algorithms) a config that names no recorded files is a
    `ConfigError`, and ``"sampler"`` in ``input_mix`` too."""
    name = type(config).__name__
    if recorded_only and not config.reads_recorded():
        raise ConfigError(
            f"{name}.input='sampler': this algorithm learns from recorded experience; set input "
            "(or input_mix) to folders, globs or files written with output=DIR"
        )
    mix = config.input_mix
    if not mix:
        if config.reads_recorded():
            return offline_batches(config)
        return parallel_rollouts(workers, mode=mode)
    if recorded_only and SAMPLER in mix:
        raise ConfigError(f"{name}.input_mix: an offline algorithm reads no 'sampler'")
    sources = [
        parallel_rollouts(workers, mode=mode) if key == SAMPLER else offline_batches(config, key)
        for key in mix
    ]
    if len(sources) == 1:
        return sources[0]
    smallest = min(mix.values())
    weights = [float(weight) / smallest for weight in mix.values()]
    return concurrently(sources, mode="round_robin", round_robin_weights=weights)


def recorded_rows_per_batch(config: AlgorithmConfig) -> float:
    """The mean rows of one recorded batch (row group) over ``config``'s recorded sources,
    from the files' footers: what one item of `offline_batches` holds, for a plan that paces
    its training by rows read (``training_intensity``)."""
    rows = groups = 0
    for source in config.recorded_sources():
        for path in experience_files(source, f"{type(config).__name__}.input"):
            file = ExperienceFile(path)
            rows, groups = rows + file.num_rows, groups + file.num_row_groups
            file.close()
    if not groups:
        raise ConfigError(f"{type(config).__name__}: the recorded experience holds no rows")
    return rows / groups


def require_columns(config: AlgorithmConfig, columns: list[str], who: str) -> None:
    """`ConfigError` unless every recorded source of ``config`` has ``columns`` (its first
    file's): e.g. a replay policy trains on ``next_obs``, which only policies that need it
    record."""
    for source in config.recorded_sources():
        first = experience_files(source, f"{type(config).__name__}.input")[0]
        file = ExperienceFile(first)
        file.close()
        missing = [c for c in columns if c not in file.columns]
        if missing:
            raise ConfigError(
                f"{who}: the recorded experience {os.fspath(first)!r} has no column "
                f"{missing}; it needs {columns} (record it with a run of the same algorithm, "
                "whose policy writes them)"
            )

"""Recorded experience read back as a dataflow source.

`rlflow.config.offline.experience_files` resolves an ``input`` (a folder, a glob, a file, or a list
of them) to the Parquet files it names. :func:`read_experience` spreads those files over
``num_shards`` reader shards (`rlflow.flow.from_iterators`: an actor each on Ray, so files are read
and decoded in parallel), each a :class:`ShardReader` that yields one batch per written row group (a
sampled fragment, whole) in an order shuffled per epoch, over all of its files, from ``seed``, the
shard and the epoch number, and starts the next epoch when it has read all of them. A file of the
policy ``default_policy`` gives `SampleBatch` items; a file of another policy gives a
`MultiAgentBatch` holding that policy's rows.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from rlflow import flow
from rlflow.checks import check_int
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError
from rlflow.offline.parquet import ExperienceFile

__all__ = ["ShardReader", "read_experience"]


class ShardReader:
    """One reader shard's files, read epoch after epoch: each call gives the next epoch.

    An epoch visits every row group (a written batch) of every file once, in an order drawn
    from ``(seed, shard, epoch)`` over all of the shard's row groups, so consecutive batches
    come from different files (and different runs, when ``input`` mixes them). At most
    ``max_open_files`` files are kept open; the footers are read once, at the first epoch.
    """

    def __init__(
        self,
        files: Sequence[Path | str],
        *,
        seed: int | None,
        shard: int,
        max_open_files: int = 32,
    ) -> None:
        self.files = list(files)
        self.seed = seed
        self.shard = shard
        self.max_open_files = max_open_files
        self.epoch = 0
        """Epochs started so far."""
        self._open: OrderedDict[int, ExperienceFile] = OrderedDict()
        self._units: list[tuple[int, int]] | None = None

    def _file(self, k: int) -> ExperienceFile:
        file = self._open.pop(k, None)
        if file is None:
            file = ExperienceFile(self.files[k])
            if len(self._open) >= self.max_open_files:
                self._open.popitem(last=False)[1].close()
        self._open[k] = file
        return file

    def units(self) -> list[tuple[int, int]]:
        """Every ``(file index, row group)`` of the shard."""
        if self._units is None:
            self._units = [
                (k, g) for k in range(len(self.files)) for g in range(self._file(k).num_row_groups)
            ]
        return self._units

    def __call__(self) -> Iterator[SampleBatch | MultiAgentBatch]:
        units = self.units()
        seed = (
            [self.shard, self.epoch] if self.seed is None else [self.seed, self.shard, self.epoch]
        )
        order = np.random.default_rng(seed).permutation(len(units))
        self.epoch += 1
        for u in order:
            k, group = units[u]
            file = self._file(k)
            batch = file.read(group)
            if file.policy_id == DEFAULT_POLICY_ID:
                yield batch
            else:
                yield MultiAgentBatch({file.policy_id: batch}, batch.count)


def read_experience(
    files: Sequence[Path | str], *, num_shards: int = 1, seed: int | None = None
) -> flow.ParallelIterator[SampleBatch | MultiAgentBatch]:
    """A repeating parallel iterator over ``files``: file ``i`` goes to shard ``i % num_shards``
    (at most one shard per file)."""
    files = list(files)
    if not files:
        raise ConfigError("read_experience: no files to read")
    check_int(num_shards, "read_experience: num_shards", low=1)
    shards = min(num_shards, len(files))
    readers = [ShardReader(files[i::shards], seed=seed, shard=i) for i in range(shards)]
    name = f"read_experience[{len(files)} files, shards={shards}]"
    return flow.from_iterators(readers, repeat=True, name=name)

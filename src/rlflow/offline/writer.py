"""`ExperienceWriter`: what one rollout worker samples, written as Parquet files.

A run with ``output=DIR`` gives each sampling worker a writer. Every batch the worker samples
(postprocessed, as its learner gets it) is buffered per policy (consecutive small ones become one
row group of at least `ROW_GROUP_ROWS` rows); once a policy has ``max_rows_per_file`` rows buffered
they become one file, ``DIR/<policy id>/worker<i>-<n>.parquet`` (``n`` counts that worker's files of
that policy from 0, past any file already there), and when the worker stops the rest is written.
``DIR/schema.json`` describes the columns of each policy (written once per policy, by the first
writer to get there). A file appears only when complete (`rlflow.offline.parquet.write_parquet`
renames it into place), so a worker killed mid-run loses only what it had buffered. ``DIR`` may
be in object storage (``s3://bucket/data``; `rlflow.storage`): each file is written locally and
uploaded in one piece, so there too a file appears only when complete.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from rlflow import storage
from rlflow.checks import check_int
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch
from rlflow.errors import OfflineDataError
from rlflow.offline.parquet import FORMAT, FORMAT_VERSION, batch_schema, write_parquet

__all__ = ["ROW_GROUP_ROWS", "SCHEMA_FILE", "ExperienceWriter"]

ROW_GROUP_ROWS = 64
"""Consecutive sampled batches smaller than this are joined into one row group of at least
this many rows (a SAC run samples one step at a time: 10,000 one-row groups per file read
slowly and bloat its footer). Larger groups shuffle worse: the readers' unit is a group, and
at 256 MARWIL's CartPole learning test fell from a mean evaluation of 493 to 443 (PPO's
128-row fragments were joined in pairs)."""

SCHEMA_FILE = "schema.json"
"""The file beside the policies' folders that describes their columns."""


class ExperienceWriter:
    """Buffers one worker's sampled batches and writes them as Parquet files under ``root``.

    >>> import tempfile, numpy as np
    >>> root = tempfile.mkdtemp()
    >>> writer = ExperienceWriter(root, worker_index=1, max_rows_per_file=4)
    >>> writer.write(SampleBatch({"obs": np.zeros((3, 2), np.float32), "actions": [0, 1, 1]}))
    >>> writer.write(SampleBatch({"obs": np.ones((3, 2), np.float32), "actions": [1, 0, 0]}))
    >>> sorted(p.name for p in (Path(root) / "default_policy").iterdir())
    ['worker1-000000.parquet']
    >>> writer.close()  # the rest, if any (none here: both batches are in the first file)
    >>> writer.rows_written, writer.files_written
    (6, 1)
    """

    def __init__(self, root: str | os.PathLike[str], *, worker_index: int, max_rows_per_file: int):
        """Write under ``root`` (created if missing; or an object-storage URI) as worker
        ``worker_index``."""
        self.root: Path | str = (
            storage.check_location(root, "output").rstrip("/")
            if storage.is_remote(root)
            else Path(root)
        )
        self.worker_index = check_int(worker_index, "ExperienceWriter: worker_index", low=0)
        self.max_rows_per_file = check_int(
            max_rows_per_file, "ExperienceWriter: max_rows_per_file", low=1
        )
        self._buffers: dict[str, list[SampleBatch]] = {}
        self._buffered_rows: dict[str, int] = {}
        self._next_file: dict[str, int] = {}
        self.rows_written = 0
        """Rows in the files written so far."""
        self.files_written = 0
        """Files written so far."""
        self.bytes_written = 0
        """Bytes of the files written so far."""
        self.seconds_writing = 0.0
        """Wall seconds spent encoding and writing files."""

    def write(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Buffer ``batch`` (each policy's rows of a `MultiAgentBatch` apart); write the files
        that are full."""
        parts = (
            batch.policy_batches
            if isinstance(batch, MultiAgentBatch)
            else {DEFAULT_POLICY_ID: batch}
        )
        for pid, part in parts.items():
            if part.count == 0:
                continue
            # A copy: whatever the plan does to the batch after sampling never reaches the files.
            copied = SampleBatch({name: np.array(column) for name, column in part.items()})
            self._buffers.setdefault(pid, []).append(copied)
            self._buffered_rows[pid] = self._buffered_rows.get(pid, 0) + part.count
            if self._buffered_rows[pid] >= self.max_rows_per_file:
                self._flush(pid)

    def flush(self) -> None:
        """Write every policy's buffered rows, full file or not."""
        for pid in list(self._buffers):
            self._flush(pid)

    def close(self) -> None:
        """Write what is buffered; the writer can still be used after (a new file each time)."""
        self.flush()

    def _flush(self, pid: str) -> None:
        batches = self._buffers.pop(pid, [])
        rows = self._buffered_rows.pop(pid, 0)
        if not batches:
            return
        start = time.perf_counter()
        folder = storage.join(self.root, pid)
        if not storage.is_remote(folder):
            Path(folder).mkdir(parents=True, exist_ok=True)
        self._write_schema(pid, batches[0])
        n = self._next_file.get(pid, 0)
        path = storage.join(folder, f"worker{self.worker_index}-{n:06d}.parquet")
        while storage.exists(path):  # a recreated worker, or an earlier run into the folder
            n += 1
            path = storage.join(folder, f"worker{self.worker_index}-{n:06d}.parquet")
        self._next_file[pid] = n + 1
        self.bytes_written += write_parquet(path, pid, batches, row_group_rows=ROW_GROUP_ROWS)
        self.rows_written += rows
        self.files_written += 1
        self.seconds_writing += time.perf_counter() - start

    def _write_schema(self, pid: str, batch: SampleBatch) -> None:
        """Add ``pid``'s columns to ``schema.json`` unless it lists them (rename-safe: several
        workers may write it; the last complete one wins, each lists what its writer saw)."""
        path = storage.join(self.root, SCHEMA_FILE)
        try:
            schema = json.loads(storage.read_text(path)) if storage.is_file(path) else {}
        except (OSError, json.JSONDecodeError):
            schema = {}
        policies = schema.setdefault("policies", {})
        if pid in policies:
            return
        columns = batch_schema(batch, f"output {self.root}")
        policies[pid] = {name: spec.to_json() for name, spec in columns.items()}
        schema.update(format=FORMAT, version=FORMAT_VERSION)
        if storage.is_remote(path):  # one upload: the object is replaced whole
            storage.write_text(path, json.dumps(schema, indent=1, sort_keys=True))
            return
        partial = Path(path).with_name(f".{SCHEMA_FILE}.{os.getpid()}.{self.worker_index}.partial")
        try:
            partial.write_text(json.dumps(schema, indent=1, sort_keys=True))
            partial.replace(path)
        except OSError as err:
            raise OfflineDataError(
                f"output {self.root}: cannot write {SCHEMA_FILE}: {err}"
            ) from None

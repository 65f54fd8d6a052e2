"""Experience in and out: what a run samples written as Parquet files, read back as a dataflow
source for offline algorithms (``bc``, ``marwil``) and for any plan.

- Writing: a run with ``output=DIR`` (``--output DIR``) gives each sampling worker an
  `ExperienceWriter`; files land in ``DIR/<policy id>/worker<i>-<n>.parquet``, a
  ``DIR/schema.json`` beside them (`rlflow.offline.writer`).
- The format: one row group per sampled batch, every column's dtype and shape kept
  (`rlflow.offline.parquet`).
- Reading: ``input=DIR | glob | [paths]`` names the files
  (`rlflow.config.offline.experience_files`); `read_experience` reads them in
  ``num_input_readers`` parallel shards, shuffled per epoch from the run's seed, epoch after
  epoch (`rlflow.offline.reader`); the plans' source is `rlflow.ops.offline.offline_batches`.

Needs pyarrow (``pip install "rl-flow[offline]"``), imported on the first file written or read.
"""

from rlflow.offline.parquet import FileContents, read_parquet, write_parquet
from rlflow.offline.reader import ShardReader, read_experience
from rlflow.offline.writer import SCHEMA_FILE, ExperienceWriter

__all__ = [
    "SCHEMA_FILE",
    "ExperienceWriter",
    "FileContents",
    "ShardReader",
    "read_experience",
    "read_parquet",
    "write_parquet",
]

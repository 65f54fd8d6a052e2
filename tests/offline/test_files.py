"""Recorded experience files: exact round trips, the writer's files, the readers' order, and
errors that name the file or the config field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlflow.algorithms import PPOConfig
from rlflow.config.offline import experience_files
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError, OfflineDataError
from rlflow.offline import (
    SCHEMA_FILE,
    ExperienceWriter,
    ShardReader,
    read_experience,
    read_parquet,
    write_parquet,
)

pytestmark = pytest.mark.timeout(120)


def every_dtype(rows: int, seed: int) -> SampleBatch:
    """A batch with a column of each kind a batch can hold, NaN and extremes included."""
    rng = np.random.default_rng(seed)
    nan = np.full(rows, np.nan, np.float32)
    nan[::2] = -np.inf
    return SampleBatch(
        {
            "obs": rng.integers(0, 256, (rows, 4, 6, 6), dtype=np.uint8),
            "f16": rng.random((rows, 3)).astype(np.float16),
            "f32": rng.standard_normal((rows, 2, 2)).astype(np.float32),
            "f64": rng.standard_normal(rows),
            "nan": nan,
            "b": rng.random(rows) > 0.5,
            "b2": rng.random((rows, 5)) > 0.5,
            "i8": rng.integers(-128, 128, (rows, 2), dtype=np.int8),
            "i64": rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, rows),
            "u16": rng.integers(0, 2**16, rows, dtype=np.uint16),
            "u64": rng.integers(0, np.iinfo(np.uint64).max, rows, dtype=np.uint64),
            "empty_rows": np.zeros((rows, 0), np.float32),
        }
    )


def concat(batches: list[SampleBatch]) -> SampleBatch:
    return SampleBatch.concat_samples(batches)


def assert_same(a: SampleBatch, b: SampleBatch) -> None:
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert a[name].shape == b[name].shape, name
        assert a[name].tobytes() == b[name].tobytes(), name


def test_small_batches_share_row_groups_of_at_least_the_rows_asked(tmp_path: Path) -> None:
    batches = [every_dtype(n, n) for n in (3, 2, 4, 9, 1)]
    write_parquet(tmp_path / "x.parquet", "p", batches, row_group_rows=5)
    groups = read_parquet(tmp_path / "x.parquet").batches
    assert [g.count for g in groups] == [5, 4 + 9, 1]  # 9 rows never split; the rest last
    assert_same(concat(groups), concat(batches))


def test_round_trip_is_byte_identical_for_every_dtype(tmp_path: Path) -> None:
    batches = [every_dtype(5, 0), every_dtype(1, 1), every_dtype(7, 2)]
    size = write_parquet(tmp_path / "x.parquet", "pol", batches)
    assert size == (tmp_path / "x.parquet").stat().st_size > 0
    contents = read_parquet(tmp_path / "x.parquet")
    assert contents.policy_id == "pol"
    assert len(contents.batches) == 3  # one row group per batch, in order
    for written, read in zip(batches, contents.batches, strict=True):
        assert_same(written, read)


def test_columns_that_cannot_be_written_are_named(tmp_path: Path) -> None:
    bad = SampleBatch({"obs": np.zeros((2, 1)), "infos": np.array([{"a": 1}, {}], dtype=object)})
    with pytest.raises(OfflineDataError, match=r"column 'infos' has dtype object"):
        write_parquet(tmp_path / "x.parquet", "p", [bad])
    assert not list(tmp_path.iterdir())  # nothing half-written
    a, b = SampleBatch({"x": np.zeros(2)}), SampleBatch({"x": np.zeros(2, np.float32)})
    with pytest.raises(OfflineDataError, match="same columns, dtypes and shapes"):
        write_parquet(tmp_path / "y.parquet", "p", [a, b])


def test_truncated_foreign_and_newer_files_give_errors_naming_the_file(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    good = tmp_path / "good.parquet"
    write_parquet(good, "p", [every_dtype(50, 0)])
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(OfflineDataError, match=r"truncated\.parquet: not a readable Parquet"):
        read_parquet(truncated)
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}), foreign)
    with pytest.raises(OfflineDataError, match=r"foreign\.parquet: a Parquet file without rlflow"):
        read_parquet(foreign)
    text = tmp_path / "notes.parquet"
    text.write_text("hello")
    with pytest.raises(OfflineDataError, match=r"notes\.parquet"):
        read_parquet(text)
    meta = json.loads(pq.ParquetFile(good).schema_arrow.metadata[b"rlflow"])
    newer = tmp_path / "newer.parquet"
    table = pq.read_table(good)
    meta["version"] = 99
    pq.write_table(table.replace_schema_metadata({b"rlflow": json.dumps(meta).encode()}), newer)
    with pytest.raises(OfflineDataError, match=r"newer\.parquet: written by a newer rlflow"):
        read_parquet(newer)


def test_writer_files_hold_whole_batches_and_appear_when_complete(tmp_path: Path) -> None:
    writer = ExperienceWriter(tmp_path, worker_index=3, max_rows_per_file=10)
    batches = [every_dtype(n, n) for n in (4, 4, 4, 3, 2)]
    for batch in batches[:2]:
        writer.write(batch)
    assert not (tmp_path / "default_policy").exists()  # 8 rows buffered, no file yet
    writer.write(batches[2])  # 12 rows: the first file
    assert sorted(p.name for p in (tmp_path / "default_policy").iterdir()) == [
        "worker3-000000.parquet"
    ]
    for batch in batches[3:]:
        writer.write(batch)
    writer.close()  # the 5 remaining rows
    files = sorted((tmp_path / "default_policy").iterdir())
    assert [p.name for p in files] == ["worker3-000000.parquet", "worker3-000001.parquet"]
    # Small consecutive batches share a row group: the rows, in order, are what was written.
    groups = [read_parquet(f).batches for f in files]
    assert [[b.count for b in g] for g in groups] == [[12], [5]]
    assert_same(concat([b for g in groups for b in g]), concat(batches))
    assert (writer.rows_written, writer.files_written) == (17, 2)
    schema = json.loads((tmp_path / SCHEMA_FILE).read_text())
    assert schema["policies"]["default_policy"]["obs"] == {"dtype": "|u1", "shape": [4, 6, 6]}
    # A second writer of the same worker index (a recreated worker) never overwrites a file.
    again = ExperienceWriter(tmp_path, worker_index=3, max_rows_per_file=1)
    again.write(batches[0])
    assert sorted(p.name for p in (tmp_path / "default_policy").iterdir())[-1] == (
        "worker3-000002.parquet"
    )


def test_multi_agent_batches_keep_their_policy_ids(tmp_path: Path) -> None:
    writer = ExperienceWriter(tmp_path, worker_index=1, max_rows_per_file=100)
    first = MultiAgentBatch({"red": every_dtype(3, 0), "blue": every_dtype(2, 1)}, 4)
    second = MultiAgentBatch({"red": every_dtype(1, 2)}, 1)
    writer.write(first)
    writer.write(second)
    writer.close()
    red = read_parquet(tmp_path / "red" / "worker1-000000.parquet")
    blue = read_parquet(tmp_path / "blue" / "worker1-000000.parquet")
    assert (red.policy_id, blue.policy_id) == ("red", "blue")
    assert_same(
        concat(red.batches), concat([first.policy_batches["red"], second.policy_batches["red"]])
    )
    assert_same(concat(blue.batches), first.policy_batches["blue"])
    # Read back as a source: a non-default policy's rows come as MultiAgentBatch items.
    items = list(ShardReader(experience_files(tmp_path / "blue"), seed=0, shard=0)())
    assert len(items) == 1 and isinstance(items[0], MultiAgentBatch)
    assert items[0].env_steps() == 2
    assert_same(items[0].policy_batches["blue"], first.policy_batches["blue"])


def numbered(tmp_path: Path, files: int, groups: int) -> list[Path]:
    """``files`` files of ``groups`` one-row batches; row value = 100 * file + group."""
    paths = []
    for f in range(files):
        path = tmp_path / f"f{f}.parquet"
        batches = [SampleBatch({"v": np.array([100 * f + g])}) for g in range(groups)]
        write_parquet(path, "default_policy", batches)
        paths.append(path)
    return paths


def test_shard_reader_visits_every_batch_once_per_epoch_in_a_seeded_order(tmp_path: Path) -> None:
    files = numbered(tmp_path, files=3, groups=4)
    everything = sorted(100 * f + g for f in range(3) for g in range(4))
    reader = ShardReader(files, seed=7, shard=0, max_open_files=2)

    def epoch() -> list[int]:
        return [int(b["v"][0]) for b in reader()]

    first, second = epoch(), epoch()
    assert sorted(first) == sorted(second) == everything
    assert first != second  # a new order each epoch
    assert first[:4] != [first[0] // 100 * 100 + g for g in range(4)]  # files interleave
    again = ShardReader(files, seed=7, shard=0)
    assert [int(b["v"][0]) for b in again()] == first  # the same seed, the same order
    other = ShardReader(files, seed=8, shard=0)
    assert [int(b["v"][0]) for b in other()] != first


def test_read_experience_shards_files_and_repeats_epochs(
    local_backend: None, tmp_path: Path
) -> None:
    files = numbered(tmp_path, files=3, groups=2)
    source = read_experience(files, num_shards=2, seed=0)
    assert source.num_shards() == 2
    values = [int(b["v"][0]) for b in source.gather_sync().take(12)]  # a batch of each a round
    # Shard 0 reads files 0 and 2 (4 batches an epoch), shard 1 file 1 (2 an epoch).
    assert sorted(values[0::2][:4]) == [0, 1, 200, 201]
    assert set(values[0::2][4:]) <= {0, 1, 200, 201}
    assert sorted(values[1::2]) == [100, 100, 100, 101, 101, 101]  # three epochs
    assert read_experience(files, num_shards=9, seed=0).num_shards() == 3  # one file at least


def test_input_names_files_by_folder_glob_and_list(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    files = numbered(tmp_path / "a", files=2, groups=1)
    (tmp_path / "a" / ".f9.parquet.partial").write_bytes(b"")  # a file being written
    (tmp_path / "b").mkdir()
    other = numbered(tmp_path / "b", files=1, groups=1)
    assert experience_files(str(tmp_path / "a")) == [p.resolve() for p in files]
    assert experience_files(str(tmp_path / "*" / "f0.parquet")) == [
        p.resolve() for p in (files[0], other[0])
    ]
    assert experience_files([str(tmp_path / "b"), str(files[1]), str(tmp_path / "b")]) == [
        p.resolve() for p in (other[0], files[1])
    ]
    with pytest.raises(ConfigError, match=r"input='/nowhere': no such folder or file"):
        experience_files("/nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"holds no \.parquet files"):
        experience_files(str(tmp_path / "empty"))


def test_config_checks_offline_fields_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"PPOConfig.input='/nowhere/x': no such folder"):
        PPOConfig(input="/nowhere/x")
    with pytest.raises(ConfigError, match="output_max_rows_per_file"):
        PPOConfig(output=str(tmp_path), output_max_rows_per_file=0)
    with pytest.raises(ConfigError, match="num_input_readers"):
        PPOConfig(num_input_readers=0)
    with pytest.raises(ConfigError, match=r"PPOConfig.output=3 must be a folder path"):
        PPOConfig(output=3)  # type: ignore[arg-type]
    assert not PPOConfig().reads_recorded()


def test_the_writer_keeps_what_was_sampled_not_later_changes(tmp_path: Path) -> None:
    writer = ExperienceWriter(tmp_path, worker_index=0, max_rows_per_file=100)
    batch = SampleBatch({"obs": np.arange(6, dtype=np.float32).reshape(3, 2)})
    writer.write(batch)
    batch["obs"] *= -1  # a later stage changing the arrays in place
    writer.close()
    (path,) = (tmp_path / "default_policy").iterdir()
    assert read_parquet(path).batches[0]["obs"].tolist() == [[0, 1], [2, 3], [4, 5]]

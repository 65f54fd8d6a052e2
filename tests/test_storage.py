"""Storage URIs where a path goes (`rlflow.storage`), against a real S3-compatible server.

The module starts moto's S3 server on 127.0.0.1 (a free port) and points rlflow at it the way a
user points it at MinIO: ``AWS_ENDPOINT_URL`` and credentials in the environment. A ``rlflow
train`` run writes its run dir and checkpoints to ``s3://``, is killed with SIGKILL, and resumes
from its latest complete checkpoint there; Parquet ``output=`` goes there and ``input=`` reads it
back; a policy is exported there, loaded and evaluated from there. Bad input (an unknown scheme,
no credentials, a pyarrow without S3, no bucket) is a `ConfigError` before anything starts.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlflow import Trainer, flow, load_policy, storage
from rlflow.checkpoint import (
    CHECKPOINT_META,
    CHECKPOINT_STATE,
    latest_checkpoint,
    load_checkpoint,
    write_checkpoint,
)
from rlflow.cli import main
from rlflow.config.offline import experience_files
from rlflow.errors import ConfigError
from rlflow.offline import read_parquet

pytestmark = pytest.mark.timeout(120)

BUCKET = "bucket"
TINY = [
    "ppo", "--env", "CartPole-v1", "--backend", "local", "--num-workers", "0", "--no-tuned",
    "--seed", "0", "--set", "sgd_minibatch_size=16", "--set", "rollout_fragment_length=32",
    "--set", "train_batch_size=64", "--set", "num_sgd_iter=2", "--logger", "jsonl,csv,tensorboard",
]  # fmt: skip
"""A PPO CartPole run of 64 env steps per iteration, on the driver (no actor)."""
KILL_AFTER = 3
"""The killed run gets SIGKILL once this many checkpoints are complete in the bucket."""


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """moto's S3 server on a free port of 127.0.0.1 with the bucket ``bucket``; the
    environment names it (``AWS_ENDPOINT_URL``, test credentials) for this module's tests and
    every process they start."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    with pytest.MonkeyPatch.context() as patch:
        for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION"):
            patch.delenv(key, raising=False)
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        patch.setenv("AWS_REGION", "us-east-1")
        patch.setenv("AWS_ENDPOINT_URL", endpoint)
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        try:
            yield endpoint
        finally:
            storage._FILESYSTEMS.clear()
            server.stop()


@pytest.fixture(autouse=True)
def _no_backend_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)  # runs/ of a run without --out, plot.png
    flow.shutdown()
    yield
    flow.shutdown()


def _progress(run_dir: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in storage.read_text(f"{run_dir}/progress.jsonl").split("\n")
            if line]  # fmt: skip


def _complete_checkpoints(run_dir: str) -> list[int]:
    return sorted(
        int(m.group(1))
        for name in storage.list_files(run_dir)
        if (m := re.fullmatch(rf"checkpoint_(\d+)/{CHECKPOINT_META}", name))
    )


# --------------------------------------------------------------------------- the round trip
def test_a_run_killed_on_s3_resumes_from_its_latest_complete_checkpoint(
    s3: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = f"s3://{BUCKET}/killed"
    log = tmp_path / "train.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlflow", "train", *TINY, "--out", run_dir,
             "--checkpoint-every", "1", "--stop-iters", "100000"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "TMPDIR": str(tmp_path)},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 90
            while len(_complete_checkpoints(run_dir)) < KILL_AFTER:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGKILL)  # no checkpoint, no last sync: the machine died
            proc.wait(timeout=30)
    written = _complete_checkpoints(run_dir)
    assert written[:KILL_AFTER] == list(range(1, KILL_AFTER + 1)), written
    before = {row["iteration"]: row for row in _progress(run_dir)}
    assert set(before) >= set(range(1, written[-1] + 1))  # synced before each checkpoint
    # The newest checkpoint loses its marker, as when the kill lands mid-upload: skipped.
    unpublished = written[-1]
    storage.delete(f"{run_dir}/checkpoint_{unpublished:06d}/{CHECKPOINT_META}")
    assert storage.is_file(f"{run_dir}/checkpoint_{unpublished:06d}/{CHECKPOINT_STATE}")
    resumed_from = unpublished - 1
    assert latest_checkpoint(run_dir) == f"{run_dir}/checkpoint_{resumed_from:06d}"
    capsys.readouterr()

    stop = unpublished + 2
    code = main(["train", "--restore", run_dir, "--backend", "local", "--checkpoint-every", "1",
                 "--stop-iters", str(stop)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"from {run_dir}/checkpoint_{resumed_from:06d} (iteration {resumed_from})" in out
    after = _progress(run_dir)
    assert [row["iteration"] for row in after] == list(range(1, stop + 1))  # each one once
    for row in after[:resumed_from]:  # the lines before the checkpoint are the killed run's
        assert row == before[row["iteration"]]
    steps = [row["num_env_steps_sampled"] for row in after]
    assert steps == [64 * i for i in range(1, stop + 1)]  # no step lost or counted twice
    # The resumed run redoes the iterations after its checkpoint exactly as the killed one did.
    for row in after[resumed_from:unpublished]:
        assert row["episode_return_mean"] == before[row["iteration"]]["episode_return_mean"]
    assert _complete_checkpoints(run_dir)[-1] == stop
    assert load_checkpoint(latest_checkpoint(run_dir))["iteration"] == stop  # the resumed run's
    names = storage.list_files(run_dir)
    assert "result.json" in names and "plan.json" in names and "progress.csv" in names
    events = [n for n in names if n.startswith("events.out.tfevents.")]
    assert len(events) == 2  # the killed run's and the resumed run's (its purge step)
    assert not Path("s3:").exists()  # nothing local named after the scheme
    sys.stderr.write(
        f"\nS3 round trip: {len(written)} checkpoints complete when killed ({written[0]}.."
        f"{written[-1]}), {written[-1]} unpublished, resumed from {resumed_from}: iteration "
        f"{resumed_from} / {steps[resumed_from - 1]} env steps -> iteration {stop} / "
        f"{steps[-1]} env steps\n"
    )


# --------------------------------------------------------------------------- checkpoints
def test_checkpoints_in_s3_are_published_by_their_marker(s3: str) -> None:
    root = f"s3://{BUCKET}/markers"
    state = {"algorithm": "ppo", "config": {}, "iteration": 1, "weights": np.arange(5)}
    assert write_checkpoint(f"{root}/checkpoint_000001", state, {"iteration": 1}) == (
        f"{root}/checkpoint_000001"
    )
    assert sorted(storage.list_files(f"{root}/checkpoint_000001")) == [
        CHECKPOINT_META,
        CHECKPOINT_STATE,
    ]
    # A state without its marker (the writer died between the two uploads) does not count.
    storage.write_bytes(f"{root}/checkpoint_000002/{CHECKPOINT_STATE}", b"half")
    assert latest_checkpoint(root) == f"{root}/checkpoint_000001"
    with pytest.raises(ConfigError, match=rf"checkpoint_000002.*{CHECKPOINT_META} is missing"):
        load_checkpoint(f"{root}/checkpoint_000002")
    # ... and is replaced by the next write there.
    write_checkpoint(f"{root}/checkpoint_000002", {**state, "iteration": 2}, {"iteration": 2})
    assert latest_checkpoint(root) == f"{root}/checkpoint_000002"
    loaded = load_checkpoint(root + "/checkpoint_000002")
    assert loaded["iteration"] == 2 and loaded["weights"].tolist() == [0, 1, 2, 3, 4]
    # A damaged state file is named by its URI.
    storage.write_bytes(f"{root}/checkpoint_000002/{CHECKPOINT_STATE}", b"damaged")
    with pytest.raises(ConfigError, match=rf"'{root}/checkpoint_000002/{CHECKPOINT_STATE}'"):
        load_checkpoint(root + "/checkpoint_000002")
    with pytest.raises(ConfigError, match=r"a run dir\? its latest complete checkpoint is"):
        load_checkpoint(root)
    # A folder of other files is never replaced.
    storage.write_text(f"{root}/mine/notes.txt", "keep")
    with pytest.raises(ConfigError, match="is not an rlflow checkpoint; refusing"):
        write_checkpoint(f"{root}/mine", state, {})
    with pytest.raises(ConfigError, match="does not exist"):
        latest_checkpoint(f"s3://{BUCKET}/nothing-here")


def test_a_trainers_logdir_in_s3_is_staged_locally_and_synced_at_each_save(s3: str) -> None:
    logdir = f"s3://{BUCKET}/api-run"
    config = {
        "env": "CartPole-v1",
        "num_workers": 0,
        "train_batch_size": 64,
        "rollout_fragment_length": 32,
        "sgd_minibatch_size": 32,
        "model": {"hidden": (8,)},
    }
    trainer = Trainer("ppo", config=config, logdir=logdir, backend="local")  # fmt: skip
    staging = trainer.loggers.logdir
    try:
        assert trainer.loggers.location == logdir
        assert staging is not None and staging.is_dir() and "s3:" not in str(staging)
        trainer.train()
        assert "progress.jsonl" not in storage.list_files(logdir)  # not synced yet
        trainer.save(f"{logdir}/checkpoint_000001")
        names = storage.list_files(logdir)
        assert {"plan.json", "progress.jsonl", "progress.csv"} <= set(names)
        assert any(n.startswith("events.out.tfevents.") for n in names)
        trainer.train()
    finally:
        trainer.stop()
    assert [row["iteration"] for row in _progress(logdir)] == [1, 2]  # the last sync: at stop
    assert not staging.exists()


# --------------------------------------------------------------------------- offline data
def test_parquet_output_to_s3_is_read_back_as_input(s3: str) -> None:
    data = f"s3://{BUCKET}/experience"
    recording = {
        "env": "CartPole-v1",
        "num_workers": 0,
        "rollout_fragment_length": 50,
        "train_batch_size": 100,
        "model": {"hidden": (8,)},
        "output": data,
        "output_max_rows_per_file": 100,
        "seed": 0,
    }
    with Trainer("pg", config=recording, backend="local") as trainer:
        for _ in range(3):
            result = trainer.train()
    files = experience_files(data)
    assert [storage.name_of(f) for f in files] == [
        "worker0-000000.parquet",
        "worker0-000001.parquet",
        "worker0-000002.parquet",
    ]
    assert all(isinstance(f, str) and f.startswith(f"{data}/default_policy/") for f in files)
    rows = [read_parquet(f).batches for f in files]
    assert sum(b.count for bs in rows for b in bs) == result["num_env_steps_sampled"] == 300
    assert "schema.json" in storage.list_files(data)
    assert experience_files(f"{data}/default_policy/worker0-00000[12].parquet") == files[1:]
    config = {"env": "CartPole-v1", "model": {"hidden": (8,)}, "input": data}
    bc = {**config, "train_batch_size": 200, "sgd_minibatch_size": 100}
    with Trainer("bc", config=bc, backend="local") as trainer:
        learned = trainer.train()
    assert learned["num_env_steps_trained"] >= 200
    with pytest.raises(ConfigError, match=r"input='s3://bucket/none': no such folder or file"):
        Trainer("bc", config={**config, "input": f"s3://{BUCKET}/none"}, backend="local")


# --------------------------------------------------------------------------- export, evaluate, plot
def test_export_to_s3_then_load_evaluate_and_plot_from_there(
    s3: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, exported = f"s3://{BUCKET}/small", f"s3://{BUCKET}/exported"
    assert main(["train", *TINY, "--out", run_dir, "--stop-iters", "2"]) == 0
    assert main(["export", run_dir, "-o", exported]) == 0
    assert f"to {exported}; load it with rlflow.load_policy('{exported}')" in (
        capsys.readouterr().out
    )
    assert sorted(storage.list_files(exported)) == ["policy.json", "weights.pt"]
    policy = load_policy(exported)
    obs = np.array([[0.01, -0.02, 0.03, 0.04], [0.2, 0.1, -0.1, -0.3]], np.float32)
    with Trainer.restore(latest_checkpoint(run_dir), backend="local") as trainer:
        expected = trainer.compute_actions(obs)
    np.testing.assert_array_equal(policy.compute_actions(obs), expected)
    assert main(["evaluate", run_dir, "--episodes", "2"]) == 0
    assert "ppo on CartPole-v1, iteration 2: 2 greedy episodes" in capsys.readouterr().out
    assert main(["plan", run_dir]) == 0  # the saved graph with its measured stages
    assert "TrainOneStep" in capsys.readouterr().out
    pytest.importorskip("matplotlib")
    assert main(["plot", run_dir, "-o", f"s3://{BUCKET}/plots/curve.png"]) == 0
    assert storage.read_bytes(f"s3://{BUCKET}/plots/curve.png")[:4] == b"\x89PNG"


# --------------------------------------------------------------------------- bad input
def test_an_unknown_scheme_is_a_config_error_listing_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ConfigError, match=r"path 'foo://x/run': unknown storage scheme 'foo://'; "
                       r"rlflow accepts a local path or file://, s3://, gs://"):  # fmt: skip
        storage.check_location("foo://x/run")
    assert main(["train", *TINY[:-2], "--backend", "ray", "--out", "foo://x/run"]) == 2
    assert "--out 'foo://x/run': unknown storage scheme 'foo://'" in capsys.readouterr().err
    assert not flow.is_initialized()  # refused before any backend started
    with pytest.raises(ConfigError, match=r"PPOConfig.output 'foo://x': unknown storage scheme"):
        Trainer("ppo", env="CartPole-v1", output="foo://x", backend="local")
    assert storage.local_path("file:///tmp/run") == Path("/tmp/run")


def test_s3_without_credentials_or_s3_support_or_bucket_is_refused_before_anything_starts(
    s3: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = f"s3://{BUCKET}/never"
    with monkeypatch.context() as patch:
        patch.delenv("AWS_ACCESS_KEY_ID")
        patch.setenv("HOME", str(tmp_path))  # no ~/.aws
        assert main(["train", *TINY[:-2], "--backend", "ray", "--out", uri]) == 2
        err = capsys.readouterr().err
        assert f"--out '{uri}': no S3 credentials found; set AWS_ACCESS_KEY_ID" in err
        assert main(["train", "--restore", uri, "--backend", "ray"]) == 2
        assert f"--restore '{uri}': no S3 credentials found" in capsys.readouterr().err
    with monkeypatch.context() as patch:
        import pyarrow.fs

        patch.delattr(pyarrow.fs, "S3FileSystem")
        patch.setattr(storage, "_FILESYSTEMS", {})
        assert main(["train", *TINY[:-2], "--backend", "ray", "--out", uri]) == 2
        err = capsys.readouterr().err
        assert f"'{uri}': s3:// needs pyarrow with S3FileSystem support" in err
        assert 'pip install "rl-flow[storage]"' in err
    assert main(["train", *TINY[:-2], "--backend", "ray", "--out", "s3://no-bucket/run"]) == 2
    assert "the bucket 'no-bucket' does not exist" in capsys.readouterr().err
    assert not flow.is_initialized()
    assert not storage.exists(uri)

"""``rlflow train`` with its loggers: the default files, ``--logger``, a resumed run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlflow import flow
from rlflow.cli import main

pytestmark = pytest.mark.timeout(120)

TINY = [
    "--backend", "local", "--num-workers", "1", "--no-tuned",
    "--set", "rollout_fragment_length=16", "--set", "train_batch_size=32",
]  # fmt: skip


def _events(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def _csv_rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "progress.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_default_loggers_write_jsonl_csv_and_tensorboard(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    code = main(["train", "ppo", "--env", "CartPole-v1", *TINY, "--set", "sgd_minibatch_size=16",
                 "--stop-iters", "3", "--out", str(run_dir)])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 0, err
    progress = [json.loads(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()]
    rows = _csv_rows(run_dir)
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3]
    assert "info/learner/default_policy/kl" in rows[0]
    returns = _events(run_dir, "episode_return_mean")
    expected = [
        (r["iteration"], r["episode_return_mean"])
        for r in progress
        if r["episode_return_mean"] is not None
    ]
    assert [s for s, _ in returns] == [s for s, _ in expected] and returns
    assert [v for _, v in returns] == pytest.approx([v for _, v in expected], rel=1e-6)
    for r, row in zip(progress, rows, strict=True):
        assert float(row["num_env_steps_sampled"]) == r["num_env_steps_sampled"]
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["config"]["loggers"] == ["jsonl", "csv", "tensorboard"]


def test_logger_flag_picks_the_loggers_and_a_resume_follows_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    code = main(["train", "pg", *TINY, "--logger", "csv,tensorboard", "--stop-iters", "2",
                 "--out", str(run_dir)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert not (run_dir / "progress.jsonl").exists()
    code = main(["train", "--restore", str(run_dir), "--backend", "local", "--stop-iters", "4"])
    assert code == 0, capsys.readouterr().err
    rows = _csv_rows(run_dir)
    assert [(r["iteration"], r["num_env_steps_sampled"]) for r in rows] == [
        ("1", "32"),
        ("2", "64"),
        ("3", "96"),
        ("4", "128"),
    ]
    assert _events(run_dir, "num_env_steps_sampled") == [
        (1, 32.0),
        (2, 64.0),
        (3, 96.0),
        (4, 128.0),
    ]


def test_unknown_logger_is_exit_2_before_anything_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["train", "pg", *TINY, "--logger", "csv,tensorbord", "--out", str(tmp_path / "r")])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and "unknown logger 'tensorbord'" in err
    assert "jsonl, csv, tensorboard, wandb, mlflow" in err
    assert not (tmp_path / "r").exists() and not flow.is_initialized()

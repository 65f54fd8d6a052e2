"""The result loggers: exact CSV/JSONL files, TensorBoard events read back with TensorBoard's
own reader, user loggers, bad names refused before any actor starts, resumed runs."""

from __future__ import annotations

import csv
import importlib.machinery
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import rlflow
from rlflow import flow
from rlflow.config import AlgorithmConfig
from rlflow.errors import ConfigError
from rlflow.loggers import (
    CsvLogger,
    JsonlLogger,
    Logger,
    LoggerSet,
    MLflowLogger,
    TensorBoardLogger,
    WandbLogger,
    flatten,
    open_logger,
    read_progress,
)
from rlflow.loggers.tensorboard import scalars

pytestmark = pytest.mark.timeout(60)

TINY: dict[str, Any] = dict(
    env="CartPole-v1", num_workers=1, rollout_fragment_length=16, train_batch_size=32, seed=3
)

R1 = {
    "iteration": 1,
    "episode_return_mean": None,
    "info": {"learner": {"p0": {"loss": 0.5}}},
    "hist": [1, 2],
}
R2 = {
    "iteration": 2,
    "episode_return_mean": 10.5,
    "info": {"learner": {"p0": {"loss": 0.25}}},
    "hist": [3],
    "policy_reward_mean": {"a": 1.0, "b": float("nan")},
}


@pytest.fixture(autouse=True)
def _no_backend() -> Any:
    flow.shutdown()
    yield
    flow.shutdown()


def _csv(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


def _scalars(logdir: Path, tag: str) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


class Recorder:
    """A user logger: keeps what it gets."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []
        self.closed = 0

    def on_result(self, result: Any) -> None:
        self.results.append(dict(result))

    def close(self) -> None:
        self.closed += 1


# ----------------------------------------------------------------------------- files
def test_flatten_joins_nested_keys_with_a_slash() -> None:
    assert flatten(R2) == {
        "iteration": 2,
        "episode_return_mean": 10.5,
        "info/learner/p0/loss": 0.25,
        "hist": [3],
        "policy_reward_mean/a": 1.0,
        "policy_reward_mean/b": R2["policy_reward_mean"]["b"],
    }


def test_csv_has_one_flat_row_per_result_and_grows_columns(tmp_path: Path) -> None:
    log = CsvLogger(tmp_path, 1)
    log.on_result(R1)
    assert _csv(tmp_path / "progress.csv") == [
        ["iteration", "episode_return_mean", "info/learner/p0/loss", "hist"],
        ["1", "", "0.5", "[1, 2]"],
    ]
    log.on_result(R2)  # two new columns: the file is rewritten with them at the end
    log.on_result({**R2, "iteration": 3, "hist": []})  # no new key: appended
    log.close()
    assert _csv(tmp_path / "progress.csv") == [
        ["iteration", "episode_return_mean", "info/learner/p0/loss", "hist",
         "policy_reward_mean/a", "policy_reward_mean/b"],
        ["1", "", "0.5", "[1, 2]", "", ""],
        ["2", "10.5", "0.25", "[3]", "1.0", ""],
        ["3", "10.5", "0.25", "[]", "1.0", ""],
    ]  # fmt: skip


def test_resumed_file_loggers_keep_earlier_rows_and_drop_lost_ones(tmp_path: Path) -> None:
    csv_log, jsonl_log = CsvLogger(tmp_path, 1), JsonlLogger(tmp_path, 1)
    for i in (1, 2, 3):
        csv_log.on_result({"iteration": i, "x": i * 10})
        jsonl_log.on_result({"iteration": i, "x": i * 10})
    csv_log.close(), jsonl_log.close()
    # restored at iteration 1 (iterations 2 and 3 were lost): they follow on from 2
    csv_log, jsonl_log = CsvLogger(tmp_path, 2), JsonlLogger(tmp_path, 2)
    csv_log.on_result({"iteration": 2, "x": 99})
    jsonl_log.on_result({"iteration": 2, "x": 99})
    csv_log.close(), jsonl_log.close()
    assert _csv(tmp_path / "progress.csv") == [["iteration", "x"], ["1", "10"], ["2", "99"]]
    lines = (tmp_path / "progress.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"iteration": 1, "x": 10},
        {"iteration": 2, "x": 99},
    ]
    assert read_progress(tmp_path, ("iteration", "x")) == {"iteration": [1, 2], "x": [10, 99]}


def test_a_new_run_in_an_old_dir_starts_the_files_afresh(tmp_path: Path) -> None:
    for start in (1, 1):
        log = LoggerSet(["csv", "jsonl"], tmp_path)
        log.on_result({"iteration": start, "x": 1.5})
        log.close()
    assert _csv(tmp_path / "progress.csv") == [["iteration", "x"], ["1", "1.5"]]
    assert len((tmp_path / "progress.jsonl").read_text().splitlines()) == 1


def test_read_progress_names_the_columns_it_has(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no progress\.csv or progress\.jsonl"):
        read_progress(tmp_path, ("x",))
    (tmp_path / "progress.jsonl").write_text(json.dumps(R2) + "\n")
    assert read_progress(tmp_path, ("info/learner/p0/loss",)) == {"info/learner/p0/loss": [0.25]}
    with pytest.raises(ConfigError, match=r"no column 'los'; it has: .*info/learner/p0/loss"):
        read_progress(tmp_path, ("los",))


# ----------------------------------------------------------------------------- tensorboard
def test_tensorboard_scalars_read_back_by_tensorboard(tmp_path: Path) -> None:
    log = open_logger("tensorboard", tmp_path)
    assert isinstance(log, TensorBoardLogger)
    log.on_result(R1)
    log.on_result(R2)
    log.close()
    assert _scalars(tmp_path, "episode_return_mean") == [(2, 10.5)]  # None is left out
    assert _scalars(tmp_path, "info/learner/p0/loss") == [(1, 0.5), (2, 0.25)]
    assert _scalars(tmp_path, "policy_reward_mean/a") == [(2, 1.0)]
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert "hist" not in acc.Tags()["scalars"]


def test_tensorboard_steps_continue_after_a_resume(tmp_path: Path) -> None:
    log = TensorBoardLogger(tmp_path, 1)
    for i in (1, 2, 3):
        log.on_result({"iteration": i, "x": float(i)})
    log.close()
    log = TensorBoardLogger(tmp_path, 2)  # restored at iteration 1: steps 2, 3 were lost
    for i in (2, 3, 4):
        log.on_result({"iteration": i, "x": 10.0 * i})
    log.close()
    assert _scalars(tmp_path, "x") == [(1, 1.0), (2, 20.0), (3, 30.0), (4, 40.0)]


def test_scalars_keep_numbers_only_with_valid_tags() -> None:
    result = {"a": 1, "ok": True, "s": "x", "n": None, "stages": {"for_each(F)#2": {"items": 3}}}
    assert scalars(result) == {"a": 1.0, "stages/for_each_F__2/items": 3.0}


# ----------------------------------------------------------------------------- the trainer
def test_trainer_logs_every_result_to_its_loggers(tmp_path: Path) -> None:
    mine = Recorder()
    assert isinstance(mine, Logger)
    with rlflow.Trainer("pg", backend="local", logdir=tmp_path, **TINY) as trainer:
        assert trainer.loggers.add(mine) is mine
        results = [trainer.train() for _ in range(3)]
    assert mine.closed == 1
    assert mine.results == results
    assert [r["iteration"] for r in results] == [1, 2, 3]
    assert set(results[0]["stages"]) and all(s["items"] >= 1 for s in results[0]["stages"].values())
    rows = list(csv.DictReader((tmp_path / "progress.csv").open(newline="")))
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3]
    assert [int(r["num_env_steps_sampled"]) for r in rows] == [32, 64, 96]
    jsonl = [json.loads(x) for x in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert [r["num_env_steps_sampled"] for r in jsonl] == [32, 64, 96]
    sampled = _scalars(tmp_path, "num_env_steps_sampled")
    assert sampled == [(1, 32.0), (2, 64.0), (3, 96.0)]
    returns = _scalars(tmp_path, "episode_return_mean")
    assert [s for s, _ in returns] == [r["iteration"] for r in results if r["episode_return_mean"]]
    for (_, value), r in zip(returns, results[-len(returns) :], strict=True):
        assert value == pytest.approx(r["episode_return_mean"], rel=1e-6)
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert any(t.startswith("info/learner/default_policy/") for t in tags)
    assert any(t.startswith("stages/") and t.endswith("/fn_time_s") for t in tags)


def test_without_logdir_only_added_loggers_get_results(tmp_path: Path) -> None:
    with rlflow.Trainer("pg", backend="local", **TINY) as trainer:
        mine = trainer.loggers.add(Recorder())
        trainer.train()
    assert len(mine.results) == 1 and list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match="on_result and close"):
        LoggerSet().add(object())  # type: ignore[arg-type]


def test_bad_logger_names_fail_before_any_actor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_workers(*args: Any) -> None:
        raise AssertionError("workers were started")

    monkeypatch.setattr("rlflow.trainer._make_workers", no_workers)
    with pytest.raises(ConfigError) as err:
        rlflow.Trainer("pg", backend="local", loggers=["csv", "tensorbored"], logdir=tmp_path)
    assert "'tensorbored'" in str(err.value) and "PGConfig.loggers" in str(err.value)
    assert "jsonl, csv, tensorboard, wandb, mlflow" in str(err.value)
    with pytest.raises(ConfigError, match="list of logger names"):
        AlgorithmConfig(loggers=[1])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="named twice"):
        AlgorithmConfig(loggers="csv, csv")
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed
    with pytest.raises(ConfigError, match=r'pip install "rl-flow\[wandb\]"'):
        rlflow.Trainer("pg", backend="local", loggers="csv,wandb", logdir=tmp_path)
    assert not flow.is_initialized() and list(tmp_path.iterdir()) == []
    assert AlgorithmConfig(loggers="csv, tensorboard").loggers == ("csv", "tensorboard")


def test_restored_trainer_follows_on_in_its_logdir(tmp_path: Path) -> None:
    with rlflow.Trainer("pg", backend="local", logdir=tmp_path, **TINY) as trainer:
        trainer.train(), trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        trainer.train()  # lost: the run is restored from iteration 2
    with rlflow.Trainer.restore(path, backend="local", logdir=tmp_path) as trainer:
        trainer.train()
    rows = list(csv.DictReader((tmp_path / "progress.csv").open(newline="")))
    assert [(r["iteration"], r["num_env_steps_sampled"]) for r in rows] == [
        ("1", "32"),
        ("2", "64"),
        ("3", "96"),
    ]
    assert _scalars(tmp_path, "num_env_steps_sampled") == [(1, 32.0), (2, 64.0), (3, 96.0)]
    assert len((tmp_path / "progress.jsonl").read_text().splitlines()) == 3


# ----------------------------------------------------------------------------- optional ones
def _fake_module(monkeypatch: pytest.MonkeyPatch, name: str, **attrs: Any) -> None:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(attrs)
    monkeypatch.setitem(sys.modules, name, module)


def test_wandb_logger_runs_offline_in_the_run_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []

    class Run:
        def log(self, data: dict[str, float], step: int) -> None:
            calls.append(("log", data, step))

        def finish(self) -> None:
            calls.append(("finish",))

    def init(**kwargs: Any) -> Run:
        calls.append(("init", kwargs))
        return Run()

    _fake_module(monkeypatch, "wandb", init=init)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    log = open_logger("wandb", tmp_path / "run", start=3)
    assert isinstance(log, WandbLogger)
    log.on_result({"iteration": 3, "episode_return_mean": 7, "info": {"lr": 0.1}, "env": "x"})
    log.close()
    assert calls[0][1]["mode"] == "offline" and calls[0][1]["dir"] == str(tmp_path / "run")
    assert calls[0][1]["name"] == "run"
    assert calls[1:] == [
        ("log", {"iteration": 3.0, "episode_return_mean": 7.0, "info/lr": 0.1}, 3),
        ("finish",),
    ]


def test_mlflow_logger_uses_a_local_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    _fake_module(
        monkeypatch,
        "mlflow",
        set_tracking_uri=lambda uri: calls.append(("uri", uri)),
        start_run=lambda run_name: calls.append(("start", run_name)),
        log_param=lambda key, value: calls.append(("param", key, value)),
        log_metrics=lambda data, step: calls.append(("metrics", data, step)),
        end_run=lambda: calls.append(("end",)),
    )
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    log = open_logger("mlflow", tmp_path, start=1)
    assert isinstance(log, MLflowLogger)
    log.on_result({"iteration": 1, "loss": 2})
    log.close()
    assert calls == [
        ("uri", f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}"),
        ("start", tmp_path.name),
        ("param", "start_iteration", 1),
        ("metrics", {"iteration": 1.0, "loss": 2.0}, 1),
        ("end",),
    ]


# ------------------------------------------------------------ the real package (dev extra)
def test_real_wandb_writes_an_offline_run_in_the_run_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the installed wandb and no network setting, the run is offline and lands in the run
    dir (``wandb sync`` uploads it later)."""
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    log = open_logger("wandb", tmp_path / "run", start=1)
    try:
        for i in (1, 2):
            log.on_result({"iteration": i, "episode_return_mean": 5.0 * i})
        log.close()
    finally:
        import wandb

        wandb.teardown()  # its service process would live as long as this one (conftest)
    (run,) = (tmp_path / "run" / "wandb").glob("offline-run-*")
    (records,) = run.glob("run-*.wandb")
    assert records.stat().st_size > 0

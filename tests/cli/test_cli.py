"""The ``rlflow`` command line, run in-process on the local backend with tiny budgets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlflow import flow
from rlflow.cli import main
from rlflow.cli.resolve import should_stop
from rlflow.config.files import load_config_file, tuned_config_path
from rlflow.config.model import ModelConfig
from rlflow.errors import ConfigError
from rlflow.trainer import Trainer

pytestmark = pytest.mark.timeout(60)

TINY = [
    "--backend", "local", "--num-workers", "1", "--no-tuned",
    "--set", "rollout_fragment_length=16", "--set", "train_batch_size=32",
]  # fmt: skip


@pytest.fixture
def idle() -> bool:
    """``flow.is_initialized()`` with no backend chosen (True if another module left Ray up)."""
    flow.shutdown()
    return flow.is_initialized()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_train_writes_the_run_dir_and_evaluate_reads_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, idle: bool
) -> None:
    out_dir = tmp_path / "run"
    code, out, err = run(
        capsys, "train", "pg", "--env", "CartPole-v1", *TINY, "--seed", "5",
        "--stop-iters", "3", "--checkpoint-every", "2", "--out", str(out_dir),
    )  # fmt: skip
    assert code == 0, err
    assert err == ""
    lines = [line for line in out.splitlines() if line.startswith("iter ")]
    assert len(lines) == 3 and "steps/s" in lines[0] and "env steps" in lines[0]
    assert "done (iteration=3 >= 3)" in out
    progress = [json.loads(x) for x in (out_dir / "progress.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in progress] == [1, 2, 3]
    assert progress[-1]["num_env_steps_sampled"] == 96
    assert json.loads((out_dir / "result.json").read_text()) == progress[-1]
    saved = yaml.safe_load((out_dir / "config.yaml").read_text())
    assert saved["algorithm"] == "pg" and saved["config"]["seed"] == 5
    assert saved["config"]["train_batch_size"] == 32 and saved["stop"] == {"iteration": 3.0}
    assert sorted(p.name for p in out_dir.glob("checkpoint_*")) == [
        "checkpoint_000002",
        "checkpoint_000003",
    ]
    assert flow.is_initialized() == idle  # the CLI started the local backend and shut it down

    code, out, err = run(capsys, "evaluate", str(out_dir / "checkpoint_000002"), "--episodes", "2")
    assert code == 0, err
    assert "2 greedy episodes" in out and "iteration 2" in out
    code, out, err = run(capsys, "evaluate", str(out_dir))  # a run dir: its latest checkpoint
    assert code == 0, err
    assert "10 greedy episodes" in out and "iteration 3" in out

    # config.yaml is a valid --config file: the same run again, stopped by timesteps
    code, out, err = run(
        capsys, "train", "pg", "--config", str(out_dir / "config.yaml"), "--backend", "local",
        "--stop-timesteps", "64", "--out", str(tmp_path / "again"),
    )  # fmt: skip
    assert code == 0, err
    assert "done (num_env_steps_sampled=64 >= 64)" in out


def test_default_run_dir_and_tuned_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert tuned_config_path("a2c", "CartPole-v1") is not None
    code, _, err = run(
        capsys, "train", "a2c", "--env", "CartPole-v1", "--backend", "local", "--stop-iters", "1"
    )
    assert code == 0, err
    (run_dir,) = Path("runs").glob("a2c_CartPole-v1_*")
    config = yaml.safe_load((run_dir / "config.yaml").read_text())["config"]
    assert config["num_envs_per_worker"] == 8  # from algorithms/a2c/tuned/CartPole-v1.yaml
    assert (run_dir / "checkpoint_000001" / "trainer_state.pkl").is_file()


def test_set_parses_yaml_values(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(
        capsys, "train", "pg", *TINY, "--set", "lr=1e-3", "--set", "model={hidden: [8]}",
        "--stop-iters", "1", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    assert code == 0, err
    config = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())["config"]
    assert config["lr"] == 0.001 and config["model"] == {**ModelConfig().to_dict(), "hidden": [8]}


def test_ctrl_c_saves_a_checkpoint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_train = Trainer.train

    def train(self: Trainer) -> dict[str, Any]:
        if self.iteration == 2:
            raise KeyboardInterrupt
        return real_train(self)

    monkeypatch.setattr(Trainer, "train", train)
    code, out, _ = run(capsys, "train", "pg", *TINY, "--out", str(tmp_path / "r"))
    assert code == 130
    assert "interrupted" in out and "done (interrupted): 2 iterations" in out
    assert (tmp_path / "r" / "checkpoint_000002" / "rlflow_checkpoint.json").is_file()
    assert len((tmp_path / "r" / "progress.jsonl").read_text().splitlines()) == 2


def test_plan_prints_a_mermaid_flowchart(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", "a3c", "--env", "CartPole-v1", "--num-workers", "1")
    assert code == 0, err
    assert out.startswith("flowchart TD") and "-->" in out
    assert not Path("runs").exists()  # nothing trained, nothing written


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert {"pg", "a2c", "a3c", "ppo"} <= set(names)
    ppo = next(line for line in out.splitlines() if line.startswith("ppo"))
    assert "Proximal" in ppo and "CartPole-v1" in ppo.partition("tuned: ")[2]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "ppp", "--env", "CartPole-v1"], "did you mean 'ppo'"),
        (["train", "pg", "--env", "CartPole-v9"], "did you mean 'CartPole-v1'"),
        (["train", "pg", "--set", "trian_batch_size=10"], "did you mean 'train_batch_size'"),
        (["train", "pg", "--set", "lr=fast"], "PGConfig.lr='fast' must be a number > 0"),
        (["train", "pg", "--set", "lr"], "expected KEY=VALUE"),
        (["train", "ppo", "--set", "model.hidden=[64,-1]"], "PPOConfig.model.hidden=[64, -1]"),
        (["train", "ppo", "--set", "model.activation=swish"], "is not supported; use one of"),
        (["train", "pg", "--num-workers", "-1"], "num_workers=-1 must be an integer >= 0"),
        (["train", "pg", "--num-workers", "two"], "train: argument --num-workers: invalid int"),
        (["train", "pg", "--stop-timesteps", "0"], "must be > 0"),
        (["train", "pg", "--config", "missing.yaml"], "cannot read config file"),
        (["train", "pg", "--config", "bad.yaml"], "cannot read config file 'bad.yaml'"),
        (["train", "pg", "--config", "list.yaml"], "must hold a mapping"),
        (["train", "pg", "--backend", "local", "--address", "x:1"], "needs --backend ray"),
        (
            ["train", "pg", "--address", "127.0.0.1:1", "--ray-init-timeout", "0.2"],
            "cannot reach a Ray cluster at address '127.0.0.1:1' within 0.2 s",
        ),
        (["train", "pg", "--ray-init-timeout", "0"], "--ray-init-timeout 0.0: must be > 0"),
        (["plan", "a2c", "--set", "gama=0.5"], "did you mean 'gamma'"),
        (["evaluate", "nowhere"], "not an rlflow checkpoint"),
        (["trian"], "invalid choice: 'trian'"),
        (["list", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str, idle: bool
) -> None:
    Path("bad.yaml").write_text("lr: [unclosed\n")
    Path("list.yaml").write_text("- 1\n- 2\n")
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("rlflow: error: ") and err.count("\n") == 1, err
    assert message in err
    assert out == ""
    assert not Path("runs").exists() and flow.is_initialized() == idle  # nothing started


def test_config_file_formats(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("lr: 0.01\nnum_workers: 1\n")
    assert load_config_file(plain).fields == {"lr": 0.01, "num_workers": 1}
    structured = tmp_path / "structured.yaml"
    structured.write_text(
        "env: CartPole-v1\nconfig: {lr: 0.01}\nstop: {episode_reward_mean: 100, time_total_s: 5}\n"
    )
    loaded = load_config_file(structured)
    assert loaded.fields == {"lr": 0.01, "env": "CartPole-v1"}
    assert loaded.stop == {"episode_return_mean": 100.0, "time_total_s": 5.0}
    structured.write_text("config: {lr: 0.01}\nstopp: {}\n")
    with pytest.raises(ConfigError, match="top-level keys"):
        load_config_file(structured)


def test_verbose_logs_to_stderr_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "-v", "plan", "a2c", "--env", "CartPole-v1", "--num-workers", "0")
    assert code == 0
    assert "INFO" in err and "tuned config" in err
    code, _, err = run(capsys, "plan", "a2c", "--env", "CartPole-v1", "--num-workers", "0")
    assert code == 0 and err == ""
    with pytest.raises(SystemExit):
        raise SystemExit(main(["--help"]))
    assert "train" in capsys.readouterr().out


# ------------------------------------------------------------------------- --restore
def _progress(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()]


def test_restore_continues_the_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    code, _, err = run(
        capsys, "train", "pg", *TINY, "--seed", "5", "--stop-iters", "2", "--out", str(run_dir)
    )
    assert code == 0, err
    first = _progress(run_dir)
    code, out, err = run(
        capsys, "train", "--restore", str(run_dir), "--backend", "local", "--stop-iters", "4"
    )
    assert code == 0, err
    assert "resuming pg" in out and "(iteration 2)" in out and "done (iteration=4 >= 4)" in out
    progress = _progress(run_dir)
    assert progress[:2] == first  # appended, not rewritten
    assert [r["iteration"] for r in progress] == [1, 2, 3, 4]
    steps = [r["num_env_steps_sampled"] for r in progress]
    assert steps == [32, 64, 96, 128]  # counters continue from the checkpoint's
    assert progress[3]["time_total_s"] > progress[1]["time_total_s"]
    assert json.loads((run_dir / "result.json").read_text()) == progress[-1]
    assert (run_dir / "checkpoint_000004").is_dir()
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["config"]["seed"] == 5 and saved["stop"] == {"iteration": 4.0}

    # stop criteria count over the whole run: already met, nothing trains
    code, out, err = run(
        capsys, "train", "--restore", str(run_dir), "--backend", "local", "--stop-timesteps", "64"
    )
    assert code == 0, err
    assert "already reached" in out and len(_progress(run_dir)) == 4

    # an explicit earlier checkpoint, a flag override: later progress lines are dropped
    code, out, err = run(
        capsys, "train", "pg", "--restore", str(run_dir / "checkpoint_000002"),
        "--backend", "local", "--set", "lr=0.002", "--stop-iters", "3",
    )  # fmt: skip
    assert code == 0, err
    assert [r["iteration"] for r in _progress(run_dir)] == [1, 2, 3]
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["config"]["lr"] == 0.002


def test_restore_of_a_lambda_env_run_and_evaluate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import gymnasium as gym

    with Trainer("pg", env=lambda: gym.make("CartPole-v1"), backend="local", num_workers=0) as t:
        t.train()
        t.save(tmp_path / "ckpt")
    code, out, err = run(capsys, "evaluate", str(tmp_path / "ckpt"), "--episodes", "1")
    assert code == 0, err
    assert "<lambda>" in out and "1 greedy episodes" in out
    code, out, err = run(
        capsys, "train", "--restore", str(tmp_path / "ckpt"), "--backend", "local",
        "--stop-iters", "2", "--out", str(tmp_path / "more"),
    )  # fmt: skip
    assert code == 0, err
    assert [r["iteration"] for r in _progress(tmp_path / "more")] == [2]


def _damage(run_dir: Path, case: str) -> None:
    ckpt = run_dir / "checkpoint_000001"
    state = ckpt / "trainer_state.pkl"
    if case == "truncated":
        state.write_bytes(state.read_bytes()[:200])
    elif case == "random_bytes":
        state.write_bytes(bytes(range(256)) * 4)
    elif case == "missing_file":
        state.unlink()
    elif case == "empty_dir":
        for child in ckpt.iterdir():
            child.unlink()


@pytest.mark.parametrize("case", ["truncated", "random_bytes", "missing_file", "empty_dir"])
def test_restore_of_a_damaged_checkpoint_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str
) -> None:
    run_dir = tmp_path / "run"
    code, _, err = run(capsys, "train", "pg", *TINY, "--stop-iters", "1", "--out", str(run_dir))
    assert code == 0, err
    _damage(run_dir, case)
    for argv in (
        ["train", "--restore", str(run_dir), "--backend", "local", "--stop-iters", "2"],
        ["evaluate", str(run_dir)],
    ):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert err.startswith("rlflow: error: ") and err.count("\n") == 1, err
        assert "checkpoint_000001" in err
    assert len(_progress(run_dir)) == 1
    with pytest.raises(ConfigError, match="checkpoint_000001"):
        Trainer.restore(run_dir / "checkpoint_000001", backend="local")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "ppo"], "the checkpoint is a 'pg' run, not 'ppo'"),
        (["train", "--env", "Acrobot-v1"], "differs from the checkpoint's env 'CartPole-v1'"),
        (["train", "--set", "lr=fast"], "PGConfig.lr='fast' must be a number > 0"),
    ],
)
def test_restore_with_conflicting_flags(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    run_dir = tmp_path / "run"
    code, _, err = run(capsys, "train", "pg", *TINY, "--stop-iters", "1", "--out", str(run_dir))
    assert code == 0, err
    code, _, err = run(capsys, *argv, "--restore", str(run_dir), "--backend", "local")
    assert code == 2 and message in err and err.count("\n") == 1, err
    code, _, err = run(capsys, "train", "--backend", "local")
    assert code == 2 and "ALGO is required" in err


def test_a_run_that_fails_to_start_leaves_no_run_dir(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Trainer, *args: Any, **kwargs: Any) -> None:
        raise ConfigError("the cluster cannot hold the workers")  # as check_cluster_fits does

    monkeypatch.setattr(Trainer, "__init__", refuse)
    fresh = tmp_path / "fresh"
    code, _, err = run(capsys, "train", "pg", *TINY, "--out", str(fresh))
    assert code == 2 and "cannot hold the workers" in err and not fresh.exists()
    given = tmp_path / "given"
    given.mkdir()
    (given / "mine.txt").write_text("keep")
    code, _, _ = run(capsys, "train", "pg", *TINY, "--out", str(given))
    assert code == 2 and (given / "mine.txt").read_text() == "keep"  # a given dir stays


def test_self_play_from_the_command_line_survives_a_restore(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The command shape: no policies given, one --set turns self-play on; the progress
    # line shows the measured win rate; a restored run keeps its snapshot schedule.
    pytest.importorskip("pettingzoo")
    run_dir = tmp_path / "run"
    sets = [
        "--set", "self_play.snapshot_every=1", "--set", "self_play.evaluation_games=10",
        "--set", "sgd_minibatch_size=32", "--set", "num_sgd_iter=1",
    ]  # fmt: skip
    code, out, err = run(
        capsys, "train", "ppo", "--env", "pettingzoo.classic.tictactoe_v3", *TINY, *sets,
        "--stop-iters", "2", "--out", str(run_dir),
    )  # fmt: skip
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("iter ")]
    assert len(lines) == 2 and "default_policy win/draw/loss vs random" in lines[1]
    assert "snapshot" not in lines[1]  # the frozen copies stay out of the line
    code, out, err = run(
        capsys, "train", "--restore", str(run_dir), "--backend", "local", "--stop-iters", "3"
    )
    assert code == 0, err
    progress = _progress(run_dir)
    assert [r["self_play"]["default_policy"]["snapshots"] for r in progress] == [1, 2, 3]
    assert progress[2]["self_play"]["default_policy"]["vs_random"]["games"] == 10


def test_stop_timesteps_counts_rows_trained_only_in_a_run_that_samples_none() -> None:
    stop = {"num_env_steps_sampled": 4000.0}
    offline = {"num_env_steps_sampled": 0, "num_env_steps_trained": 5120}
    assert should_stop(offline, stop) == "num_env_steps_trained=5120 >= 4000"
    assert should_stop({**offline, "num_env_steps_trained": 2560}, stop) is None
    online = {"num_env_steps_sampled": 3000, "num_env_steps_trained": 9000}
    assert should_stop(online, stop) is None
    assert should_stop({**online, "num_env_steps_sampled": 4000}, stop) == (
        "num_env_steps_sampled=4000 >= 4000"
    )

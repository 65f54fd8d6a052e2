"""``rlflow plot``: learning curves of run dirs, runs sharing a label drawn as a band."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from rlflow.cli import main
from rlflow.cli.plot import Curve, group_band, load_curve, run_label
from rlflow.loggers import CsvLogger, JsonlLogger

pytestmark = pytest.mark.timeout(60)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _fake_run(path: Path, seed: int, returns: list[float | None], *, jsonl: bool = False) -> Path:
    """A run dir as `rlflow train` leaves it: config.yaml and a progress file."""
    path.mkdir(parents=True)
    config = {"algorithm": "ppo", "config": {"env": "CartPole-v1", "seed": seed}, "stop": {}}
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    log = (JsonlLogger if jsonl else CsvLogger)(path, 1)
    for i, ret in enumerate(returns, start=1):
        log.on_result(
            {"iteration": i, "num_env_steps_sampled": 100 * i + seed, "episode_return_mean": ret}
        )
    log.close()
    return path


def test_two_seeds_with_one_label_make_a_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _fake_run(tmp_path / "a", 0, [None, 10.0, 20.0, 30.0])
    b = _fake_run(tmp_path / "b", 5, [12.0, 18.0, 25.0, 40.0], jsonl=True)
    assert run_label(a) == run_label(b) == "ppo CartPole-v1"
    out = tmp_path / "curves.png"
    assert main(["plot", str(a), str(b), "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000


def test_band_is_mean_min_max_over_the_common_range(tmp_path: Path) -> None:
    a = load_curve(_fake_run(tmp_path / "a", 0, [None, 10.0, 20.0, 30.0]),
                   "num_env_steps_sampled", "episode_return_mean")  # fmt: skip
    assert a.x.tolist() == [200, 300, 400] and a.y.tolist() == [10, 20, 30]
    b = Curve(np.array([100.0, 300.0, 500.0]), np.array([0.0, 40.0, 80.0]))
    x, mean, low, high = group_band([a, b])
    assert x.tolist() == [200, 300, 400]
    assert mean.tolist() == [15, 30, 45] and low.tolist() == [10, 20, 30]
    assert high.tolist() == [20, 40, 60]


def test_plot_errors_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _fake_run(tmp_path / "a", 0, [1.0, 2.0])
    assert main(["plot", str(a), "--y", "episode_reward_mean", "-o", str(tmp_path / "p.png")]) == 2
    assert "no column 'episode_reward_mean'; it has:" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "nowhere")]) == 2
    assert "no progress.csv or progress.jsonl" in capsys.readouterr().err
    assert main(["plot", str(a), "--label", "x", "--label", "y"]) == 2
    assert "one per run dir" in capsys.readouterr().err
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    assert main(["plot", str(a), "-o", str(tmp_path / "p.png")]) == 2
    assert 'pip install "rl-flow[plot]"' in capsys.readouterr().err
    assert not (tmp_path / "p.png").exists()

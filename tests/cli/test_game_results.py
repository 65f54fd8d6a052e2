"""Results that lead with what matters for several agents (issue 46, build item 5): a self-play
game's progress line, summary and ``rlflow evaluate`` show win/draw/loss rates (a zero-sum
game's mean return is 0), by seat and against the random player and the pool; ``win_rate`` is
a results key the loggers get and ``--stop-win-rate`` stops on; a team's return leads when the
results carry it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from rlflow.cli import main
from rlflow.cli.output import progress_line
from rlflow.cli.resolve import should_stop
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(300)

TINY = [
    "train", "ppo", "--env", "pettingzoo.classic.tictactoe_v3",
    "--backend", "local", "--num-workers", "0", "--no-tuned", "--seed", "0",
    "--set", "train_batch_size=128", "--set", "sgd_minibatch_size=64", "--set", "num_sgd_iter=1",
]  # fmt: skip
"""Tic-tac-toe, one small PPO iteration at a time (--no-tuned: no self-play)."""
TINY_GAME = [
    *TINY, "--set", "self_play.snapshot_every=2", "--set", "self_play.evaluation_games=10"
]  # fmt: skip
"""The same by self-play: a snapshot and a measurement of 10 games every 2 iterations."""
WDL = r"(\d\.\d\d)/(\d\.\d\d)/(\d\.\d\d)"
"""win/draw/loss rates as the progress line writes them."""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _rates(match: re.Match[str]) -> list[float]:
    rates = [float(x) for x in match.groups()]
    assert sum(rates) == pytest.approx(1, abs=0.011)  # rounded to 2 decimals each
    return rates


def test_a_self_play_run_leads_with_win_draw_loss_in_its_lines_results_and_evaluate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("pettingzoo")
    run_dir = tmp_path / "run"
    code, out, err = run(capsys, *TINY_GAME, "--stop-iters", "3", "--out", str(run_dir))
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("iter ")]
    assert len(lines) == 3 and not any("| return" in line for line in lines)
    first, measured, carried = lines
    # Before any measurement: dashes; the pool's games count from the first iteration.
    assert "default_policy win/draw/loss vs random -/-/-, vs pool " in first
    _rates(re.search(f"vs pool {WDL}", first))  # type: ignore[arg-type]
    # Measured at iteration 2: overall and by seat.
    by_seat = re.search(f"vs random {WDL} \\(player_1 {WDL}, player_2 {WDL}\\)", measured)
    assert by_seat is not None, measured
    # Iteration 3 carries iteration 2's measurement, saying so.
    assert re.search(f"vs random {WDL} \\(iter 2\\), vs pool {WDL}", carried), carried
    assert carried.split("vs random ")[1][:14] == measured.split("vs random ")[1][:14]
    assert re.search(r"done \(.*\): 3 iterations, .* win_rate 0\.\d\d", out)
    # The loggers get the keys: every iteration from the first measurement on (no NaN).
    progress = [json.loads(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()]
    assert "win_rate" not in progress[0]
    win_rates = [r["win_rate"] for r in progress[1:]]
    assert win_rates[0] == win_rates[1] == progress[1]["self_play"]["default_policy"]["win_rate"]
    header = (run_dir / "progress.csv").read_text().splitlines()[0].split(",")
    assert {"win_rate", "draw_rate", "loss_rate", "self_play/default_policy/vs_pool/win_rate"} <= (
        set(header)
    )
    code, out, err = run(capsys, "evaluate", str(run_dir), "--episodes", "6")
    assert code == 0, err
    assert "win/draw/loss rates (greedy against the random legal player)" in out
    for name in ("vs random", "vs newest snapshot"):
        line = next(x for x in out.splitlines() if f"default_policy {name}:" in x)
        found = re.search(
            r"win (\d\.\d\d) draw (\d\.\d\d) loss (\d\.\d\d) in 6 games \(by seat: "
            f"player_1 {WDL}, player_2 {WDL}\\)",
            line,
        )
        assert found is not None, line
        assert sum(float(x) for x in found.groups()[:3]) == pytest.approx(1, abs=0.011)
    assert "return mean" not in out


def test_stop_win_rate_stops_a_run_at_the_first_measurement_that_reaches_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("pettingzoo")
    run_dir = tmp_path / "run"
    # Any policy wins some of 10 games against a random player; nothing is measured before
    # iteration 2, so the run stops there, not at iteration 1 (no key yet) nor at 6.
    argv = [*TINY_GAME, "--stop-win-rate", "0.05", "--stop-iters", "6", "--out", str(run_dir)]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "stop: win_rate >= 0.05" in out
    assert re.search(r"done \(win_rate=0\.\d+ >= 0\.05\): 2 iterations", out), out
    code, _, err = run(capsys, *TINY_GAME, "--stop-win-rate", "1.5", "--out", str(tmp_path / "x"))
    assert code == 2 and "--stop-win-rate 1.5: must be a rate in (0, 1]" in err


def test_should_stop_waits_while_the_win_rate_is_unmeasured() -> None:
    assert should_stop({"iteration": 1}, {"win_rate": 0.5}) is None
    assert should_stop({"win_rate": math.nan}, {"win_rate": 0.5}) is None
    assert should_stop({"win_rate": 0.6}, {"win_rate": 0.5}) == "win_rate=0.6 >= 0.5"


def test_a_teams_return_leads_the_line_when_the_results_carry_it() -> None:
    result: dict[str, Any] = {
        "iteration": 3,
        "episode_return_mean": 0.0,
        "team_return_mean": {"red": 0.75, "blue": -0.75},
        "num_env_steps_sampled": 600,
        "time_total_s": 1.0,
    }
    assert progress_line(result).startswith("iter    3 | team return red 0.75 blue -0.75 |")
    del result["team_return_mean"]
    assert progress_line(result).startswith("iter    3 | return     0.00 |")


def test_config_error_type_is_used_for_a_bad_rate() -> None:
    from argparse import Namespace

    from rlflow.cli.resolve import stop_criteria

    flags = dict.fromkeys(
        ("stop_reward", "stop_policy_reward", "stop_timesteps", "stop_time", "stop_iters")
    )
    with pytest.raises(ConfigError, match=r"--stop-win-rate 0\.0"):
        stop_criteria(Namespace(**flags, stop_win_rate=0.0), {})
    assert stop_criteria(Namespace(**flags, stop_win_rate=0.9), {}) == {"win_rate": 0.9}


def test_a_restored_run_keeps_its_latest_measurement(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("pettingzoo")
    run_dir = tmp_path / "run"
    measure = ["--set", "self_play.evaluation_interval=2"]
    code, _, err = run(capsys, *TINY_GAME, *measure, "--stop-iters", "2", "--out", str(run_dir))
    assert code == 0, err
    code, out, err = run(
        capsys, "train", "--restore", str(run_dir), "--backend", "local", "--stop-iters", "3"
    )
    assert code == 0, err
    progress = [json.loads(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()]
    assert progress[2]["win_rate"] == progress[1]["win_rate"]  # iteration 3 measures nothing
    assert progress[2]["self_play"]["default_policy"]["measured_at"] == 2
    assert "(iter 2)" in out.splitlines()[-4]


def test_a_zero_sum_game_without_self_play_shows_each_seats_rates(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("pettingzoo")
    run_dir = tmp_path / "run"
    code, out, err = run(capsys, *TINY, "--stop-iters", "1", "--out", str(run_dir))
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if x.startswith("iter ")]
    found = re.search(f"\\| win/draw/loss by seat player_1 {WDL}, player_2 {WDL} \\|", line)
    assert found is not None, line
    # One seat's win is the other's loss.
    assert found.group(1) == found.group(6) and found.group(3) == found.group(4)
    code, out, err = run(capsys, "evaluate", str(run_dir), "--episodes", "6")
    assert code == 0, err
    assert re.search(f"6 greedy episodes, win/draw/loss by seat player_1 {WDL}", out), out

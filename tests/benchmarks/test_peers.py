"""``benchmarks/peers.py``'s own logic, without running a peer: parsing the peers' progress
lines, the measured window, the independent step count, the table's ratios and medians, and the
reuse of a peer venv whose stamp matches."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import peer_count
import peers

SF_LINE = (
    "\x1b[36m[2026-11-29 12:45:01,766][17989] Fps is (10 sec: 615.2, 60 sec: 537.6, 300 sec: "
    "537.6). Total num frames: 21504. Throughput: 0: 553.0. Samples: 22120. Policy #0 lag: "
    "(min: 0.0, avg: 0.3, max: 1.0)\x1b[0m"
)


def test_parse_line_reads_the_drivers_json_and_sample_factorys_log() -> None:
    line = '{"report": {"sampled": 8463.0, "trained": 8456.0}}'
    assert peers.parse_line(line, frame_skip=1) == (8463.0, 8456.0)
    assert peers.parse_line('{"report": {"sampled": null, "trained": null}}', frame_skip=1) == (
        0.0,
        None,
    )
    # Sample Factory: Samples are the inference workers' steps; frames are the learner's x skip.
    assert peers.parse_line(SF_LINE, frame_skip=1) == (22120.0, 21504.0)
    assert peers.parse_line(SF_LINE, frame_skip=4) == (22120.0, 5376.0)
    assert peers.parse_line("Avg episode reward: [(0, '456.440')]", frame_skip=1) is None
    assert peers.frame_skip("ALE/Pong-v5") == 4 and peers.frame_skip("CartPole-v1") == 1


def test_the_window_starts_at_the_first_report_after_the_warm_up() -> None:
    reports = [
        peers.Report(100.0, 1000, 900),
        peers.Report(102.0, 3000, 2800),  # warm-up
        peers.Report(104.0, 5000, 4000),  # window from here ...
        peers.Report(108.0, 13000, 12000),  # ... to here
    ]
    assert peers.window(reports, 3.0) == peers.Window(104.0, 108.0, 2000.0, 2000.0)
    no_trained = [r._replace(trained=None) for r in reports]
    assert peers.window(no_trained, 3.0) == peers.Window(104.0, 108.0, 2000.0, None)
    assert peers.window(reports, 5.0) is None  # one report after the warm-up: no rate
    assert peers.window([], 0.0) is None


def test_counted_rate_interpolates_each_envs_lines_over_the_window(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("10.0 1\n11.0 101\n12.0 301\n")
    (tmp_path / "b.txt").write_text("10.5 1\n12.5 401\n")
    (tmp_path / "empty.txt").write_text("")
    series = peer_count.read_counts(tmp_path)
    assert len(series) == 2
    a = series[0]
    assert [peer_count.steps_at(a, t) for t in (9.0, 10.0, 10.5, 11.5, 13.0)] == [
        0.0,
        1.0,
        51.0,
        201.0,
        301.0,
    ]
    # 10.5 to 12.0: a steps 301 - 51 = 250, b steps 301 - 1 = 300, over 1.5 s.
    assert peer_count.counted_rate(series, 10.5, 12.0) == pytest.approx(550 / 1.5)
    assert math.isnan(peer_count.counted_rate(series, 12.0, 12.0))


def test_step_counter_writes_every_step_it_is_told_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(peer_count.COUNT_DIR_VAR, str(tmp_path))
    monkeypatch.setattr(peer_count, "FLUSH_S", 0.0)
    env = peer_count.StepCounter(gym.make("CartPole-v1"))
    env.reset(seed=0)
    for _ in range(7):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        assert not (terminated or truncated)
    env.close()
    (series,) = peer_count.read_counts(tmp_path)
    assert [n for _, n in series] == [1, 2, 3, 4, 5, 6, 7]
    monkeypatch.delenv(peer_count.COUNT_DIR_VAR)
    quiet = peer_count.StepCounter(gym.make("CartPole-v1"))  # no folder: counts, writes nothing
    quiet.reset(seed=0)
    quiet.step(0)
    assert len(list(tmp_path.iterdir())) == 1


def run(peer: str, env: str, counted: float, sampled: float = 1.0, round_: int = 1) -> peers.Run:
    return peers.Run(peer, env, round_, 2, 8, 30.0, sampled=sampled, counted=counted)


def test_summary_ratios_take_rlflows_matching_algorithm_over_the_peers_medians() -> None:
    runs = [
        run("rlflow-appo", "CartPole-v1", 9000.0, round_=1),
        run("rlflow-appo", "CartPole-v1", 11000.0, round_=2),
        run("rlflow-impala", "CartPole-v1", 12000.0),
        run("sf-appo", "CartPole-v1", 5000.0),
        run("rllib-impala", "CartPole-v1", 3000.0),
        # no independent count: the library's own rate is used
        run("rllib-appo", "CartPole-v1", math.nan, sampled=2500.0),
        peers.Run("sf-appo", "ALE/Pong-v5", 1, 2, 8, 30.0, error="exit code 1"),
    ]
    rows = {(r["env"], r["peer"]): r for r in peers.summarize(runs)}
    assert rows[("CartPole-v1", "rlflow-appo")]["counted"] == 10000.0
    assert math.isnan(rows[("CartPole-v1", "rlflow-appo")]["ratio"])
    assert rows[("CartPole-v1", "sf-appo")]["ratio"] == 2.0
    assert rows[("CartPole-v1", "rllib-appo")]["ratio"] == 4.0
    assert rows[("CartPole-v1", "rllib-impala")]["ratio"] == 4.0
    pong = rows[("ALE/Pong-v5", "sf-appo")]
    assert (pong["failed"], pong["rounds"]) == (1, 1) and math.isnan(pong["ratio"])
    table = peers.throughput_table(list(rows.values()))
    assert "| CartPole-v1 | sf-appo | 1 | 5,000 | - | 2.00x (rlflow-appo) |" in table
    assert "| ALE/Pong-v5 | sf-appo (1 of 1 failed) | - | - | - | - |" in table


def test_ppo_medians_count_a_missed_target_as_infinite() -> None:
    ppo = [
        peers.PPORun("sb3", 0, True, 60000, 20.0, 24.0, ""),
        peers.PPORun("sb3", 1, True, 62000, 22.0, 26.0, ""),
        peers.PPORun("local", 0, True, 64000, 9.0, 11.0, ""),
        peers.PPORun("local", 1, False, 200000, 30.0, 33.0, ""),
    ]
    medians = peers.ppo_medians(ppo)
    assert medians["sb3"] == {
        "steps": 61000,
        "train_s": 21.0,
        "process_s": 25.0,
        "reached": 2,
        "runs": 2,
    }
    assert math.isinf(medians["local"]["process_s"])
    assert "| sb3 | 2/2 | 61,000 | 21.0 | 25.0 | - |" in peers.ppo_table(medians)


def test_a_venv_whose_stamp_matches_is_reused_without_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = peers.Venv("peer", ("somepkg==1.0",), ("somepkg",))
    stamp = {"requirements": ["somepkg==1.0"], "setup_s": 70.6, "versions": {"somepkg": "1.0"}}
    (tmp_path / "peer").mkdir()
    (tmp_path / "peer" / "peers-stamp.json").write_text(json.dumps(stamp))

    def no_subprocess(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"ran {args}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    assert peers.ensure_venv(venv, tmp_path) == stamp
    changed = peers.Venv("peer", ("somepkg==2.0",), ("somepkg",))
    with pytest.raises(AssertionError, match="venv"):  # a changed list is set up again
        peers.ensure_venv(changed, tmp_path)


def test_unknown_peers_are_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        peers.parse_args(["--peers", "rlflow-appo,sf-ppo"])
    assert "unknown ['sf-ppo']" in capsys.readouterr().err

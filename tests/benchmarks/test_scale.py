"""``benchmarks/scale.py --quick`` (issue 22): one run of the scaling table on a small machine
prints every row, with positive rates and sane ratios, and writes them as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180)]

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    """stdout and JSON of one ``scale.py --quick`` run (its own Ray session, 2 CPUs at most)."""
    out = tmp_path_factory.mktemp("scale") / "rows.json"
    done = subprocess.run(
        [sys.executable, "scale.py", "--quick", "--json", str(out)],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, json.loads(out.read_text())


def test_every_row_is_there_with_a_positive_rate(quick_run: tuple[str, dict]) -> None:
    _, rows = quick_run
    assert rows["env"] == "CartPole-v1" and rows["seconds"] > 0
    processes = [r["processes"] for r in rows["raw"]]
    assert processes[0] == 1 and processes == sorted(set(processes))
    assert all(r["frames_per_s"] > 0 for r in rows["raw"])
    plans = {(p["algo"], p["workers"], p["learner"]) for p in rows["plans"]}
    learner = "gpu" if rows["gpu"] else "cpu"
    assert {("impala", 1, learner), ("appo", 1, learner)} <= plans
    assert (("impala", 1, "cpu") in plans) and len(plans) == len(rows["plans"])
    for p in rows["plans"]:
        assert p["sampled_frames_per_s"] > 0 and p["trained_frames_per_s"] > 0, p
    learners = {(r["policy"], r["device"], r["batch"]) for r in rows["learners"]}
    assert {("impala", "cpu", 128), ("impala", "cpu", 512), ("dqn", "cpu", 512)} <= learners
    for r in rows["learners"]:
        assert r["rows"] >= r["batch"] and r["rows_per_s"] > 0, r
        assert (r["gpu_over_cpu"] is None) == (r["device"] == "cpu"), r
        # V-trace rows also go through the learner thread; DQN's do not
        assert (r["thread_rows_per_s"] is None) == (r["policy"] == "dqn"), r
        assert r["thread_rows_per_s"] is None or r["thread_rows_per_s"] > 0, r
    assert all(p["inference"] == "cpu" for p in rows["plans"])  # CartPole's configs: CPU workers


def test_the_ratios_are_sane(quick_run: tuple[str, dict]) -> None:
    _, rows = quick_run
    raw = {r["processes"]: r["frames_per_s"] for r in rows["raw"]}
    for p in rows["plans"]:
        # The plan steps the same envs as the raw loop plus a policy, postprocessing and Ray.
        assert 0 < p["sampled_over_raw"] <= 1.05, p
        assert p["sampled_over_raw"] == pytest.approx(p["sampled_frames_per_s"] / raw[p["workers"]])
        # Batches sampled before the window can be trained in it (the learner queue's, the
        # learner's, the one being concatenated): a few batches per window above sampled.
        slack = 4 * p["train_batch_size"] / rows["seconds"]
        assert p["trained_frames_per_s"] <= 1.05 * p["sampled_frames_per_s"] + slack, p
    if rows["gpu"] is None:
        assert rows["impala_gpu_over_cpu_learner"] is None


def test_the_tables_are_printed(quick_run: tuple[str, dict]) -> None:
    stdout, _ = quick_run
    for header in ("raw random-action stepping", "sampled frames/s", "rows/s", "total"):
        assert header in stdout
    assert stdout.count("\nimpala ") >= 2 and stdout.count("\nappo ") >= 1  # plan + learner rows

"""``benchmarks/curves.py --quick``: one seed of one case, trained with the command line, plotted,
and summarized with the machine it ran on (the figures of the docs' results page)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_a_quick_case_writes_its_picture_and_its_summary(tmp_path: Path) -> None:
    out, runs = tmp_path / "curves", tmp_path / "runs"
    command = [sys.executable, "curves.py", "--quick", "--only", "pg:CartPole-v1", "--seeds",
               "0,1", "--out", str(out), "--runs", str(runs)]  # fmt: skip
    done = subprocess.run(command, cwd=BENCHMARKS, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    case = summary["cases"]["pg:CartPole-v1"]
    assert (case["budget"], case["target"], case["quick"]) == (15_000, 150.0, True)
    assert [s["seed"] for s in case["seeds"]] == [0, 1]
    for seed in case["seeds"]:
        assert seed["env_steps"] >= 15_000 and seed["seconds"] > 0
        assert 8.0 <= seed["final_return"] <= seed["best_return"] <= 500.0
    assert (out / case["picture"]).read_bytes().startswith(b"\x89PNG")
    assert summary["machine"]["cores"] >= 1 and summary["machine"]["torch"]
    assert sorted(p.name for p in runs.iterdir()) == ["pg_CartPole-v1_s0", "pg_CartPole-v1_s1"]


def test_an_unknown_case_is_named() -> None:
    done = subprocess.run(
        [sys.executable, "curves.py", "--only", "ppo:NoSuchEnv-v0"],
        cwd=BENCHMARKS, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "unknown case(s) ['ppo:NoSuchEnv-v0']" in done.stderr

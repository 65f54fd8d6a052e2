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
        assert len(seed["load"]) == 2 and min(seed["load"]) >= 0.0
    assert (case["x"], case["y"], case["data"]) == (
        "num_env_steps_sampled",
        "episode_return_mean",
        None,
    )
    assert (out / case["picture"]).read_bytes().startswith(b"\x89PNG")
    assert summary["machine"]["cores"] >= 1 and summary["machine"]["torch"]
    runs_made = ["pg_CartPole-v1_15000_s0", "pg_CartPole-v1_15000_s1"]
    assert sorted(p.name for p in runs.iterdir()) == runs_made


def test_the_policies_of_one_multi_agent_run_are_two_cases_of_one_run(tmp_path: Path) -> None:
    out, runs = tmp_path / "curves", tmp_path / "runs"
    command = [sys.executable, "curves.py", "--quick", "--only", "ppo_dqn", "--seeds", "0",
               "--out", str(out), "--runs", str(runs)]  # fmt: skip
    done = subprocess.run(command, cwd=BENCHMARKS, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [p.name for p in runs.iterdir()] == ["ppo_dqn_multi_cartpole_5000_s0"]
    cases = json.loads((out / "summary.json").read_text())["cases"]
    ppo, dqn = (cases[f"ppo_dqn:multi_cartpole:{p}_policy"] for p in ("ppo", "dqn"))
    assert (ppo["y"], dqn["y"]) == (
        "policy_reward_mean/ppo_policy",
        "policy_reward_mean/dqn_policy",
    )
    assert ppo["seeds"][0]["seconds"] == dqn["seeds"][0]["seconds"]  # trained once, drawn twice
    assert ppo["seeds"][0]["final_return"] != dqn["seeds"][0]["final_return"]
    assert {ppo["picture"], dqn["picture"]} == {
        "ppo_dqn_multi_cartpole_ppo_policy.png",
        "ppo_dqn_multi_cartpole_dqn_policy.png",
    }


def test_an_unknown_case_is_named() -> None:
    done = subprocess.run(
        [sys.executable, "curves.py", "--only", "ppo:NoSuchEnv-v0"],
        cwd=BENCHMARKS, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "unknown case(s) ['ppo:NoSuchEnv-v0']" in done.stderr

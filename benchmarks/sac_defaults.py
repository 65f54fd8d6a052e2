"""SAC with its default config on InvertedPendulum-v5: env steps/s of ``rlflow train sac`` beside
Stable-Baselines3's ``SAC("MlpPolicy", env)``, same env steps.

rlflow's run is the command line a user types, in this process: ``rlflow train sac --env
InvertedPendulum-v5 --backend local --no-tuned --stop-timesteps STEPS``, so its seconds include
what reporting costs (the progress line, ``progress.jsonl``, ``progress.csv`` and TensorBoard
rows of every iteration) and its final checkpoint; it reports the iterations and progress lines
that took. SB3's run is ``SAC("MlpPolicy", env, seed=SEED, device="cpu").learn(STEPS)``, model
building included. Both use one torch thread. The defaults differ where the libraries' do:
rlflow samples with its policy for 1,500 steps before learning (``learning_starts``), SB3 acts at
random for 100; both then take one gradient step of a 256-transition batch per env step, with
(256, 256) networks. Each round runs rlflow, then SB3; the script prints every run, the medians
over ``--rounds`` and the rlflow/SB3 ratio of env steps/s (above 1: rlflow is faster). Without
stable-baselines3 it prints that SB3's row was skipped and how to install it. Seconds are from a
small, shared machine: the 1-minute load average is printed with every run.

    python benchmarks/sac_defaults.py [--steps 3000] [--rounds 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import torch

from rlflow.cli import main as rlflow_main

ENV_ID = "InvertedPendulum-v5"
TRAIN_BATCH = 256
"""Transitions per gradient step in both libraries' defaults."""


class Run(NamedTuple):
    """One library's run: env steps, wall seconds, gradient steps, iterations and progress lines
    (rlflow; 0 for SB3), and the 1-minute load average at its start."""

    library: str
    steps: int
    seconds: float
    updates: int
    iterations: int
    lines: int
    load: float

    @property
    def rate(self) -> float:
        """Env steps per wall-clock second."""
        return self.steps / self.seconds


def load1() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def run_rlflow(steps: int, seed: int) -> Run:
    """``rlflow train sac`` with the default config until ``steps`` env steps were sampled."""
    load = load1()
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) / "run"
        argv = ["train", "sac", "--env", ENV_ID, "--backend", "local", "--no-tuned"]
        argv += ["--seed", str(seed), "--stop-timesteps", str(steps), "--out", str(out_dir)]
        stdout = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(stdout):
            code = rlflow_main(argv)
        seconds = time.perf_counter() - start
        if code != 0:
            raise SystemExit(f"rlflow train sac exited with {code}:\n{stdout.getvalue()}")
        rows = (out_dir / "progress.jsonl").read_text().splitlines()
        last = json.loads(rows[-1])
    lines = len(stdout.getvalue().splitlines())
    updates = last["num_env_steps_trained"] // TRAIN_BATCH
    return Run("rlflow", last["num_env_steps_sampled"], seconds, updates, len(rows), lines, load)


def run_sb3(steps: int, seed: int) -> Run | None:
    """SB3's SAC with its defaults for ``steps`` env steps; None without stable-baselines3."""
    try:
        import gymnasium as gym
        from stable_baselines3 import SAC
    except ImportError:
        return None
    load = load1()
    start = time.perf_counter()
    model = SAC("MlpPolicy", gym.make(ENV_ID), seed=seed, device="cpu")
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - start
    return Run("SB3", model.num_timesteps, seconds, model._n_updates, 0, 0, load)


def show(run: Run) -> None:
    """Print one run."""
    extra = f", {run.iterations} iterations, {run.lines} stdout lines" if run.iterations else ""
    print(
        f"  {run.library:6} {run.steps} env steps in {run.seconds:.1f} s: "
        f"{run.rate:.1f} env steps/s, {run.updates} gradient steps{extra} (load {run.load})",
        flush=True,
    )


def main() -> None:
    """Parse arguments, run the rounds, print the medians and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="env steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of rlflow then SB3")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs: dict[str, list[Run]] = {"rlflow": [], "SB3": []}
    for i in range(args.rounds):
        print(f"round {i + 1}/{args.rounds}", flush=True)
        for library, fn in (("rlflow", run_rlflow), ("SB3", run_sb3)):
            run = fn(args.steps, args.seed)
            if run is not None:
                runs[library].append(run)
                show(run)
    print(f"\nmedians over {args.rounds} rounds, SAC defaults, {ENV_ID}, {args.steps} env steps:")
    rates = {lib: statistics.median(r.rate for r in rs) for lib, rs in runs.items() if rs}
    rlflow_runs = runs["rlflow"]
    print(
        f"  rlflow {rates['rlflow']:.1f} env steps/s, "
        f"{statistics.median(r.iterations for r in rlflow_runs):.0f} iterations, "
        f"{statistics.median(r.lines for r in rlflow_runs):.0f} stdout lines"
    )
    if "SB3" not in rates:
        print(
            "  SB3    skipped: stable-baselines3 is not installed "
            '(pip install stable-baselines3, or pip install -e ".[bench]")'
        )
        return
    print(f"  SB3    {rates['SB3']:.1f} env steps/s")
    print(f"  rlflow/SB3 env steps/s: {rates['rlflow'] / rates['SB3']:.2f}x")


if __name__ == "__main__":
    main()

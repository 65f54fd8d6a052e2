"""SAC on HalfCheetah-v5 for a fixed wall-clock budget: rlflow's tuned config (and SB3's SAC).

Trains rlflow SAC with the shipped ``tuned/HalfCheetah-v5.yaml`` (local backend: one env on the
learner, one gradient step of batch 256 per env step, (256, 256) ReLU nets) for ``--minutes``
of wall clock (default 20; the clock starts before the trainer is built, and the run ends at
the first report past the budget). At every report (each 1,000 env steps: one HalfCheetah
episode) it records the env steps, the seconds and the mean return of the last 5 finished
training episodes (exploring policy), and prints them as they come. With ``--sb3`` it then runs
Stable-Baselines3's SAC with the same settings (lr 3e-4 for all three optimizers, buffer 1e6,
batch 256, tau 0.005, gamma 0.99, train_freq 1, gradient_steps 1, 10,000 steps before
learning, ent_coef "auto", net_arch [256, 256]) for the same budget, recorded alike, and prints
both curves side by side, the env steps/s of each and their ratio, the final returns and the
returns at the last step both reached. One difference stays: before learning starts SB3 acts
uniformly at random, rlflow with its initial policy.

Both use one torch thread. The 1-minute load average is printed at the start and the end and
recorded at every report: on a small shared machine read the seconds as rough, and compare the
two libraries of one run. Needs the ``mujoco`` extra (and ``bench`` for ``--sb3``). Each
library's run is appended as one JSON line to ``--out``.

    python benchmarks/sac_halfcheetah.py [--minutes 20] [--seed 0] [--sb3]
        [--out benchmarks/results/sac_halfcheetah.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from rlflow import Trainer
from rlflow.algorithms import tuned_config

ENV_ID = "HalfCheetah-v5"
EVERY = 1000
"""Env steps between reports (rlflow's tuned ``min_steps_per_iteration``)."""
WINDOW = 5
"""Episodes in the mean return (rlflow's tuned ``metrics_num_episodes_for_smoothing``)."""
TABLE_EVERY = 5000
"""Env steps between the rows of the side-by-side table."""


class Point(NamedTuple):
    """One report: env steps sampled, wall-clock seconds, mean return (NaN before the first
    episode ends) and the 1-minute load average."""

    steps: int
    seconds: float
    ret: float
    load: float


class Run(NamedTuple):
    """One library's run for the budget."""

    library: str
    curve: list[Point]

    @property
    def steps_per_s(self) -> float:
        """Env steps sampled per wall-clock second over the whole run (setup included)."""
        return self.curve[-1].steps / self.curve[-1].seconds

    def return_at(self, steps: int) -> float:
        """The mean return of the last report at or before ``steps`` (NaN if none)."""
        before = [p.ret for p in self.curve if p.steps <= steps]
        return before[-1] if before else float("nan")


def point(steps: int, start: float, ret: float | None, library: str) -> Point:
    """A `Point` now, printed as it comes."""
    p = Point(steps, time.perf_counter() - start, np.nan if ret is None else ret, load1())
    print(f"  {library:>6} {p.steps:>8} steps {p.seconds:>7.0f} s  return {p.ret:8.1f}", flush=True)
    return p


def load1() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def run_rlflow(seed: int, budget_s: float) -> Run:
    """rlflow's tuned config until the first report past ``budget_s`` seconds."""
    curve: list[Point] = []
    start = time.perf_counter()
    config = tuned_config("sac", ENV_ID, seed=seed, min_steps_per_iteration=EVERY)
    with Trainer("sac", backend="local", config=config) as trainer:
        while not curve or curve[-1].seconds < budget_s:
            result = trainer.train()
            steps = int(result["num_env_steps_sampled"])
            curve.append(point(steps, start, result["episode_return_mean"], "rlflow"))
    return Run("rlflow", curve)


def sb3_model(seed: int) -> Any:
    """SB3's SAC with the settings of rlflow's tuned config (the zoo's for HalfCheetah)."""
    from stable_baselines3 import SAC

    return SAC(
        "MlpPolicy",
        gym.make(ENV_ID),
        learning_rate=3e-4,
        buffer_size=1_000_000,
        learning_starts=10_000,
        batch_size=256,
        tau=0.005,
        gamma=0.99,
        train_freq=1,
        gradient_steps=1,
        ent_coef="auto",
        policy_kwargs={"net_arch": [256, 256]},
        seed=seed,
        device="cpu",
    )


def run_sb3(seed: int, budget_s: float) -> Run:
    """SB3's run, recorded by a callback from its episode infos, stopped past ``budget_s``."""
    from stable_baselines3.common.callbacks import BaseCallback

    curve: list[Point] = []
    returns: deque[float] = deque(maxlen=WINDOW)
    start = time.perf_counter()

    class Record(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    returns.append(float(info["episode"]["r"]))
            if self.num_timesteps % EVERY:
                return True
            ret = float(np.mean(returns)) if returns else None
            curve.append(point(self.num_timesteps, start, ret, "sb3"))
            return curve[-1].seconds < budget_s

    sb3_model(seed).learn(total_timesteps=10**9, callback=Record())
    return Run("sb3", curve)


def show_curves(runs: list[Run]) -> None:
    """Both curves side by side: a row per TABLE_EVERY env steps, each cell the run's first
    report at or past the row's steps and before the next row's (its seconds and return; blank
    if none, e.g. during the steps before learning), and each run's last report."""
    print(f"\nSAC {ENV_ID}: mean return of the last {WINDOW} episodes (exploring policy)")
    print(f"{'env steps':>10}" + "".join(f"{r.library + ' s':>12}{'return':>9}" for r in runs))
    last = max(r.curve[-1].steps for r in runs)
    rows = {*range(TABLE_EVERY, last + 1, TABLE_EVERY), *(r.curve[-1].steps for r in runs)}
    for steps in sorted(rows):
        cells = ""
        for r in runs:
            hit = next((p for p in r.curve if steps <= p.steps < steps + TABLE_EVERY), None)
            cells += f"{hit.seconds:>12.0f}{hit.ret:>9.1f}" if hit else f"{'':>12}{'':>9}"
        print(f"{steps:>10}{cells}")


def summary(runs: list[Run]) -> None:
    """Per run: steps, seconds, steps/s, final return; with two runs, the ratios."""
    for r in runs:
        last = r.curve[-1]
        print(
            f"{r.library:>6}: {last.steps} env steps in {last.seconds:.0f} s "
            f"({r.steps_per_s:.1f} steps/s), final return {last.ret:.1f}"
        )
    if len(runs) == 2:
        a, b = runs
        common = min(a.curve[-1].steps, b.curve[-1].steps)
        print(
            f"{a.library}/{b.library}: env steps/s {a.steps_per_s / b.steps_per_s:.2f}x, final "
            f"return {a.curve[-1].ret / b.curve[-1].ret:.2f}x; at {common} steps (both reached) "
            f"return {a.return_at(common):.1f} vs {b.return_at(common):.1f}"
        )


def record(run: Run, args: argparse.Namespace, loads: list[float]) -> dict[str, Any]:
    """One JSON row for ``run``."""
    import mujoco

    last = run.curve[-1]
    return {
        "benchmark": "sac_halfcheetah",
        "library": run.library,
        "env": ENV_ID,
        "seed": args.seed,
        "minutes": args.minutes,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "env_steps": last.steps,
        "seconds": round(last.seconds, 1),
        "steps_per_s": round(run.steps_per_s, 2),
        "final_return": round(last.ret, 1),
        "curve": [[p.steps, round(p.seconds, 1), round(p.ret, 1), p.load] for p in run.curve],
        "load_start_end": loads,
        "versions": {"torch": torch.__version__, "mujoco": mujoco.__version__},
    }


def main() -> None:
    """Parse the arguments, run rlflow (and SB3), print the curves and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="wall clock per library")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sb3", action="store_true", help="also SB3's SAC, same budget")
    parser.add_argument("--out", default=None, help="append one JSON line per library here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch threads 1, cpus {os.cpu_count()}, load average {os.getloadavg()}", flush=True)
    budget_s = 60.0 * args.minutes
    loads = [load1()]
    runs = [run_rlflow(args.seed, budget_s)]
    if args.sb3:
        runs.append(run_sb3(args.seed, budget_s))
    loads.append(load1())
    show_curves(runs)
    summary(runs)
    print(f"load average at the end {os.getloadavg()} (1-minute: start {loads[0]})")
    if args.out:
        with open(args.out, "a") as f:
            for r in runs:
                f.write(json.dumps(record(r, args, loads)) + "\n")


if __name__ == "__main__":
    main()

"""SAC and TD3 on Pendulum-v1: rlflow's tuned configs beside Stable-Baselines3's, same budget.

For each algorithm and seed, trains rlflow (the shipped ``tuned/Pendulum-v1.yaml``, local
backend) and SB3 (the rl-baselines3-zoo hyperparameters for Pendulum-v1: SAC with lr 1e-3;
TD3 with lr 1e-3, gamma 0.98, Gaussian noise 0.1, 10k random steps first, [400, 300] nets)
for ``--steps`` env steps (default 20,000). Every 1,000 steps it records the mean return of
the last 10 finished training episodes (exploring policy, both libraries alike) and the
wall-clock seconds since the run began (model building included); it prints each curve, then
per run: the first step at which that mean reached ``--target`` (default -250) and the seconds
to it, the final mean return and the total seconds, and the SB3/rlflow ratios of steps and
seconds to the target. Both use one torch thread. Needs the ``bench`` extra
(stable-baselines3). Seconds are from a small, shared machine: the 1-minute load average is
printed with every run and kept in ``--out`` (one JSON line per run); read the seconds as
rough, and compare the two columns of one run.

    python benchmarks/sac_td3_pendulum.py [--algos sac td3] [--seeds 0 1 2] [--steps 20000]
        [--out benchmarks/results/sac_td3_pendulum.jsonl]
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

ENV_ID = "Pendulum-v1"
EVERY = 1000
WINDOW = 10


class Point(NamedTuple):
    """One record: env steps, seconds since the run began, mean return (NaN before an episode
    ends)."""

    steps: int
    seconds: float
    ret: float


class Run(NamedTuple):
    """One library's run: its curve, its total seconds and the 1-minute load average at its
    start and end."""

    library: str
    curve: list[Point]
    seconds: float
    load: tuple[float, float]

    def reached(self, target: float) -> Point | None:
        """The first record whose mean return is >= ``target``, or None."""
        return next((p for p in self.curve if p.ret >= target), None)


def point(steps: int, start: float, ret: float | None) -> Point:
    """A `Point` now."""
    return Point(int(steps), time.perf_counter() - start, float("nan") if ret is None else ret)


def load1() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def run_rlflow(algo: str, seed: int, steps: int) -> Run:
    """rlflow's tuned config, one result per EVERY steps, until ``steps``."""
    curve: list[Point] = []
    load, start = load1(), time.perf_counter()
    config = tuned_config(algo, ENV_ID, seed=seed, min_steps_per_iteration=EVERY)
    with Trainer(algo, backend="local", config=config) as t:
        while not curve or curve[-1].steps < steps:
            result = t.train()
            curve.append(
                point(result["num_env_steps_sampled"], start, result["episode_return_mean"])
            )
    return Run("rlflow", curve, time.perf_counter() - start, (load, load1()))


def sb3_model(algo: str, seed: int) -> Any:
    """SB3's model with the zoo's Pendulum-v1 hyperparameters."""
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.noise import NormalActionNoise

    env = gym.make(ENV_ID)
    if algo == "sac":
        return SAC("MlpPolicy", env, learning_rate=1e-3, seed=seed, device="cpu")
    noise = NormalActionNoise(np.zeros(1), 0.1 * np.ones(1))
    return TD3(
        "MlpPolicy",
        env,
        learning_rate=1e-3,
        gamma=0.98,
        buffer_size=200_000,
        learning_starts=10_000,
        action_noise=noise,
        policy_kwargs={"net_arch": [400, 300]},
        seed=seed,
        device="cpu",
    )


def run_sb3(algo: str, seed: int, steps: int) -> Run:
    """SB3's run, the curve recorded by a callback from its episode infos."""
    from stable_baselines3.common.callbacks import BaseCallback

    curve: list[Point] = []
    returns: deque[float] = deque(maxlen=WINDOW)
    load, start = load1(), time.perf_counter()

    class Record(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    returns.append(float(info["episode"]["r"]))
            if self.num_timesteps % EVERY == 0:
                ret = float(np.mean(returns)) if returns else None
                curve.append(point(self.num_timesteps, start, ret))
            return True

    sb3_model(algo, seed).learn(total_timesteps=steps, callback=Record())
    return Run("sb3", curve, time.perf_counter() - start, (load, load1()))


def show(algo: str, seed: int, runs: list[Run], target: float) -> None:
    """Print each library's curve and summary line for one algorithm and seed."""
    print(f"\n{algo.upper()} seed {seed}: mean return of the last {WINDOW} episodes")
    for r in runs:
        points = " ".join(f"{p.steps}:{p.ret:.0f}" for p in r.curve)
        print(f"  {r.library:>6} curve (steps:return): {points}")
    for r in runs:
        hit = r.reached(target)
        to = f"{hit.steps} steps, {hit.seconds:.0f} s" if hit else "not reached"
        print(
            f"  {r.library:>6}: to {target}: {to}; final {r.curve[-1].ret:.1f} at "
            f"{r.curve[-1].steps} steps; {r.seconds:.0f} s; load {r.load[0]} -> {r.load[1]}"
        )
    hits = [r.reached(target) for r in runs]
    if len(runs) == 2 and hits[0] and hits[1]:
        a, b = hits
        print(
            f"  {runs[1].library}/{runs[0].library} to {target}: steps "
            f"{b.steps / a.steps:.2f}x, seconds {b.seconds / a.seconds:.2f}x"
        )


def record(algo: str, seed: int, run: Run, target: float) -> dict[str, Any]:
    """One JSON row for ``run``."""
    hit = run.reached(target)
    return {
        "benchmark": "sac_td3_pendulum",
        "algo": algo,
        "library": run.library,
        "seed": seed,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "target": target,
        "steps_to_target": hit.steps if hit else None,
        "seconds_to_target": round(hit.seconds, 1) if hit else None,
        "final_return": round(run.curve[-1].ret, 1),
        "env_steps": run.curve[-1].steps,
        "seconds": round(run.seconds, 1),
        "curve": [[p.steps, round(p.seconds, 1), round(p.ret, 1)] for p in run.curve],
        "load_start_end": list(run.load),
        "torch": torch.__version__,
    }


def main() -> None:
    """Parse the arguments and run every algorithm and seed with both libraries."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["sac", "td3"], choices=["sac", "td3"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--target", type=float, default=-250.0)
    parser.add_argument("--skip-sb3", action="store_true", help="rlflow's runs only")
    parser.add_argument("--out", default=None, help="append one JSON line per run here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch threads 1, cpus {os.cpu_count()}, load average {os.getloadavg()}", flush=True)
    for algo in args.algos:
        for seed in args.seeds:
            runs = [run_rlflow(algo, seed, args.steps)]
            if not args.skip_sb3:
                runs.append(run_sb3(algo, seed, args.steps))
            show(algo, seed, runs, args.target)
            if args.out:
                with open(args.out, "a") as f:
                    for r in runs:
                        f.write(json.dumps(record(algo, seed, r, args.target)) + "\n")
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()

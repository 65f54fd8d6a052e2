"""SAC and TD3 on Pendulum-v1: rlflow's tuned configs beside Stable-Baselines3's, same budget.

For each algorithm and seed, trains rlflow (the shipped ``tuned/Pendulum-v1.yaml``, local
backend) and SB3 (the rl-baselines3-zoo hyperparameters for Pendulum-v1: SAC with lr 1e-3;
TD3 with lr 1e-3, gamma 0.98, Gaussian noise 0.1, 10k random steps first, [400, 300] nets)
for ``--steps`` env steps (default 20,000). Every 1,000 steps it records the mean return of
the last 10 finished training episodes (exploring policy, both libraries alike); it prints
each curve, then per run: the first step at which that mean reached ``--target`` (default
-250), the final mean return and the wall-clock seconds. Both use one torch thread. Needs the
``bench`` extra (stable-baselines3). Seconds are from a small, shared machine: read them as
rough, and compare the two columns of one run.

    python benchmarks/sac_td3_pendulum.py [--algos sac td3] [--seeds 0 1 2] [--steps 20000]
"""

from __future__ import annotations

import argparse
import time
from collections import deque
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from rlflow import Trainer
from rlflow.algorithms import tuned_config

ENV_ID = "Pendulum-v1"
EVERY = 1000
WINDOW = 10


class Run(NamedTuple):
    """One library's run: the curve ``[(env steps, mean return)]`` and its seconds."""

    library: str
    curve: list[tuple[int, float]]
    seconds: float

    def reached(self, target: float) -> int | None:
        """The first recorded step whose mean return is >= ``target``, or None."""
        return next((steps for steps, ret in self.curve if ret >= target), None)


def run_rlflow(algo: str, seed: int, steps: int) -> Run:
    """rlflow's tuned config, one result per EVERY steps, until ``steps``."""
    curve: list[tuple[int, float]] = []
    start = time.perf_counter()
    config = tuned_config(algo, ENV_ID, seed=seed, min_steps_per_iteration=EVERY)
    with Trainer(algo, backend="local", config=config) as t:
        while not curve or curve[-1][0] < steps:
            result = t.train()
            ret = result["episode_return_mean"]
            curve.append((result["num_env_steps_sampled"], float("nan") if ret is None else ret))
    return Run("rlflow", curve, time.perf_counter() - start)


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

    curve: list[tuple[int, float]] = []
    returns: deque[float] = deque(maxlen=WINDOW)

    class Record(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    returns.append(float(info["episode"]["r"]))
            if self.num_timesteps % EVERY == 0:
                curve.append((self.num_timesteps, np.mean(returns) if returns else float("nan")))
            return True

    model = sb3_model(algo, seed)
    start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=Record())
    return Run("sb3", curve, time.perf_counter() - start)


def show(algo: str, seed: int, runs: list[Run], target: float) -> None:
    """Print each library's curve and summary line for one algorithm and seed."""
    print(f"\n{algo.upper()} seed {seed}: mean return of the last {WINDOW} episodes")
    for r in runs:
        points = " ".join(f"{steps}:{ret:.0f}" for steps, ret in r.curve)
        print(f"  {r.library:>6} curve (steps:return): {points}")
    for r in runs:
        print(
            f"  {r.library:>6}: reached {target} at {r.reached(target)} steps; final "
            f"{r.curve[-1][1]:.1f} at {r.curve[-1][0]} steps; {r.seconds:.0f} s"
        )


def main() -> None:
    """Parse the arguments and run every algorithm and seed with both libraries."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["sac", "td3"], choices=["sac", "td3"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--target", type=float, default=-250.0)
    parser.add_argument("--skip-sb3", action="store_true", help="rlflow's runs only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for algo in args.algos:
        for seed in args.seeds:
            runs = [run_rlflow(algo, seed, args.steps)]
            if not args.skip_sb3:
                runs.append(run_sb3(algo, seed, args.steps))
            show(algo, seed, runs, args.target)


if __name__ == "__main__":
    main()

"""PPO on Pendulum-v1 (continuous actions, diagonal Gaussian): learning curve to -400.

Trains rlflow PPO with the shipped ``tuned/Pendulum-v1.yaml`` until the mean return of the last
100 finished training episodes (``episode_return_mean``, exploring policy) reaches the target
(default -400) or the env-step budget (default 500k) runs out. Prints one line of the curve
(env steps, mean return, training seconds) every ``--every`` iterations and on the last one, then
the verdict, then the greedy (mean-action) return over 10 fresh episodes. Pendulum episodes are
200 steps and end by truncation only; a return of about -150 to -200 is a swung-up, balanced
pendulum, about -1200 to -1500 is a random policy.

Seconds are training time (the trainer's ``time_total_s``) on a small machine shared with other
runs: read them as rough.

    python benchmarks/ppo_pendulum.py [--seed 0] [--backend local|ray] [--every 5]
        [--target -400] [--max-steps 500000] [--full] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import torch

from rlflow import Trainer, flow
from rlflow.algorithms import PPOConfig, tuned_config
from rlflow.config.files import parse_value

ENV_ID = "Pendulum-v1"


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["lr=3e-4", "model={hidden: [64, 64]}"]`` -> config fields (YAML values)."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set {pair!r}: expected key=value")
        overrides[key] = parse_value(PPOConfig, key, text)
    return overrides


def train(args: argparse.Namespace) -> None:
    """Run to the target or the budget, printing the curve and the verdict."""
    config = tuned_config("ppo", ENV_ID, seed=args.seed, **parse_overrides(args.set)).to_dict()
    print(f"rlflow PPO on {ENV_ID}, backend {args.backend}, seed {args.seed}, config {config}")
    print(f"{'iter':>5}{'env steps':>11}{'return':>9}{'seconds':>9}{'kl':>8}{'entropy':>9}")
    reached_at: tuple[int, float] | None = None
    with Trainer("ppo", backend=args.backend, **config) as trainer:
        while True:
            result = trainer.train()
            steps, mean = int(result["num_env_steps_sampled"]), result["episode_return_mean"]
            seconds = result["time_total_s"]
            hit = mean is not None and mean >= args.target
            if hit and reached_at is None:
                reached_at = (steps, seconds)
            last = steps >= args.max_steps or (hit and not args.full)
            if result["iteration"] % args.every == 0 or last:
                stats = result.get("info", {}).get("learner", {}).get("default_policy", {})
                print(
                    f"{result['iteration']:>5}{steps:>11}"
                    f"{mean if mean is not None else float('nan'):>9.1f}{seconds:>9.1f}"
                    f"{stats.get('kl', float('nan')):>8.4f}"
                    f"{stats.get('entropy', float('nan')):>9.3f}",
                    flush=True,
                )
            if last:
                break
        greedy = trainer.evaluate(10)
    if reached_at is None:
        print(f"verdict: FAIL, mean return {mean} < {args.target} after {steps} env steps")
    else:
        print(
            f"verdict: PASS, mean return >= {args.target} after {reached_at[0]} env steps "
            f"({reached_at[1]:.1f} s of training; budget {args.max_steps})"
        )
    print(f"greedy policy: mean return {greedy['episode_return_mean']:.1f} over 10 episodes")


def main() -> None:
    """Parse arguments and train."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--every", type=int, default=5, help="print every N iterations")
    parser.add_argument("--target", type=float, default=-400.0)
    parser.add_argument("--max-steps", type=int, default=500_000)
    parser.add_argument("--full", action="store_true", help="keep training after the target")
    parser.add_argument("--set", nargs="*", default=[], help="config overrides, key=value")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch threads 1, cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    if args.backend == "ray":
        flow.init(backend="ray", num_cpus=2, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter()
    try:
        train(args)
    finally:
        if args.backend == "ray":
            flow.shutdown()
    print(f"wall clock {time.perf_counter() - start:.1f} s, load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

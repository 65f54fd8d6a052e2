"""DreamerV3 beside PPO: env steps and wall time to a target return (issue 47, part 2).

For each env (``CartPole-v1`` to a 100-episode mean of 450, ``Pendulum-v1`` to -300), trains
DreamerV3 and PPO with their shipped tuned configs (``tuned/<env>.yaml``, local backend, one
torch thread) until the mean return of the last 100 finished episodes reaches the target or
``--budget`` env steps (or ``--max-seconds``) pass, and prints, per iteration, the env steps,
seconds, train steps and mean return, then per run: the env steps and seconds to the target
(or where it stopped). DreamerV3's point is sample efficiency: far fewer env steps, each much
more expensive (``train_ratio`` replayed steps of a world model per env step). Seconds come
from a small, shared machine; the 1-minute load average is printed and kept with every run in
``--out`` (one JSON line per run).

    python benchmarks/dreamerv3.py [--envs CartPole-v1 Pendulum-v1] [--algos dreamerv3 ppo]
        [--budget 100000] [--max-seconds 3600] [--seed 0]
        [--out benchmarks/results/dreamerv3.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import UTC, datetime
from typing import Any

from rlflow import Trainer
from rlflow.algorithms import tuned_config

TARGETS = {"CartPole-v1": 450.0, "Pendulum-v1": -300.0}


def run(algo: str, env: str, budget: int, max_seconds: float, seed: int) -> dict[str, Any]:
    """One training run to ``TARGETS[env]``; its curve and where it ended."""
    config = tuned_config(algo, env, seed=seed)
    trainer = Trainer(algo, config=config, backend="local")
    start, curve = time.perf_counter(), []
    reached: dict[str, Any] | None = None
    load0 = os.getloadavg()[0]
    try:
        while True:
            result = trainer.train()
            seconds = round(time.perf_counter() - start, 1)
            steps = int(result["num_env_steps_sampled"])
            ret = result.get("episode_return_mean")
            trained = result.get("counters", {}).get("num_train_steps", 0)
            curve.append({"steps": steps, "seconds": seconds, "return": ret, "train": trained})
            print(
                f"{algo:10s} {env:12s} steps={steps:7d} s={seconds:8.1f} train={trained} "
                f"return={ret}",
                flush=True,
            )
            if ret is not None and ret >= TARGETS[env]:
                reached = {"steps": steps, "seconds": seconds}
                break
            if steps >= budget or seconds >= max_seconds:
                break
    finally:
        trainer.stop()
    return {
        "algo": algo,
        "env": env,
        "seed": seed,
        "target": TARGETS[env],
        "reached": reached,
        "final": curve[-1] if curve else None,
        "curve": curve,
        "load": [load0, os.getloadavg()[0]],
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def main() -> None:
    """Parse the arguments, run every (env, algo), print the table, append ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(TARGETS))
    parser.add_argument("--algos", nargs="+", default=["dreamerv3", "ppo"])
    parser.add_argument("--budget", type=int, default=100_000)
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/dreamerv3.jsonl")
    args = parser.parse_args()
    rows = []
    for env in args.envs:
        for algo in args.algos:
            row = run(algo, env, args.budget, args.max_seconds, args.seed)
            rows.append(row)
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
    print("\nalgo       env          target   env steps to target   seconds   (else: final)")
    for row in rows:
        end = row["reached"] or row["final"] or {}
        tag = "" if row["reached"] else f"   not reached; final return {end.get('return')}"
        print(
            f"{row['algo']:10s} {row['env']:12s} {row['target']:7.0f}   "
            f"{end.get('steps', 0):19d}   {end.get('seconds', 0.0):7.1f}{tag}"
        )


if __name__ == "__main__":
    main()

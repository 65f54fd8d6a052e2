"""Async learning quiet and loaded: env steps to the learning tests' targets over seeds.

The asynchronous algorithms (IMPALA, APPO, Ape-X, A3C) learn while their workers sample, so a
learner that is slowed down (a busy machine) trains on older batches, and a curve in env steps
could depend on the machine's load. This script runs each one's learning-test setting (the
shipped tuned CartPole-v1 config, its target and budget from ``rlflow.testing.learning.
ASYNC_TARGETS``, 2 rollout workers on a Ray session of 2 CPUs) on several seeds, quiet and with a
busy-loop process (``--hog``: one core, as CI's busy machine; started here, stopped at the end),
and prints per algorithm and condition: the env steps at which each seed reached the target
("miss" past the budget), their min / median / max, the policy lag (learner updates between
sampling and training a batch: mean over the run, largest seen) and seconds.

Run (each condition takes minutes; rows go to ``--out`` as JSON lines as they finish)::

    python benchmarks/async_learning.py [--algos impala,appo,apex,a3c] [--seeds 0,1,2,3,4]
        [--conditions quiet,hog] [--out benchmarks/results/async_learning.jsonl]
        [--set learner_queue_size=1 ...]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rlflow import flow
from rlflow.testing.learning import ASYNC_TARGETS, train_to_target


def busy_loop() -> None:
    """Keep one core busy until killed."""
    while True:
        pass


@contextmanager
def condition(name: str) -> Iterator[None]:
    """``quiet``: nothing; ``hog``: one busy-loop process for the duration."""
    if name == "quiet":
        yield
        return
    hog = multiprocessing.get_context("spawn").Process(target=busy_loop, daemon=True)
    hog.start()
    try:
        yield
    finally:
        hog.kill()
        hog.join()


def run_one(algo: str, seed: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """One run to ``algo``'s target; the row printed and saved."""
    target, budget = ASYNC_TARGETS[algo]
    outcome = train_to_target(algo, target, budget, seed=seed, overrides=overrides)
    reached = outcome.best >= target and outcome.steps <= budget
    return {
        "algo": algo,
        "seed": seed,
        "target": target,
        "budget": budget,
        "reached": reached,
        "steps": outcome.steps,
        "best": round(outcome.best, 1),
        "trained_per_sampled": round(outcome.trained / max(outcome.steps, 1), 2),
        "seconds": outcome.seconds,
        "policy_lag_mean": outcome.policy_lag_mean,
        "policy_lag_max": outcome.policy_lag_max,
    }


def summary(rows: list[dict[str, Any]]) -> str:
    """One line: steps per seed, min/median/max (a miss counts as infinite), lag, seconds."""
    steps = [r["steps"] if r["reached"] else float("inf") for r in rows]
    per_seed = " ".join(f"{s / 1000:.0f}k" if s != float("inf") else "miss" for s in steps)
    lags = [r["policy_lag_mean"] for r in rows if r["policy_lag_mean"] is not None]
    lag_max = max((r["policy_lag_max"] for r in rows if r["policy_lag_max"] is not None), default=0)
    lag = f"lag mean {statistics.fmean(lags):.2f} max {lag_max:.0f}" if lags else "lag n/a"
    seconds = statistics.median(r["seconds"] for r in rows)
    ratio = statistics.fmean(r["trained_per_sampled"] for r in rows)
    return (
        f"steps [{per_seed}] min {min(steps):.0f} median {statistics.median(steps):.0f} "
        f"max {max(steps):.0f}; {lag}; trained/sampled {ratio:.2f}; median {seconds:.0f}s"
    )


def main() -> None:
    """Parse the flags, run every algorithm x condition x seed, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algos", default=",".join(ASYNC_TARGETS))
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--conditions", default="quiet,hog")
    parser.add_argument("--out", default="benchmarks/results/async_learning.jsonl")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=JSON", help="config override"
    )
    args = parser.parse_args()
    overrides = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    seeds = [int(s) for s in args.seeds.split(",")]
    algos = args.algos.split(",")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    flow.init(backend="ray")
    table: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for cond in args.conditions.split(","):
            with condition(cond):
                for algo in algos:
                    for seed in seeds:
                        row = {
                            **run_one(algo, seed, overrides),
                            "overrides": overrides,
                            "condition": cond,
                            "load": [round(x, 2) for x in os.getloadavg()],
                        }
                        print(json.dumps(row), flush=True)
                        with open(args.out, "a") as f:
                            f.write(json.dumps(row) + "\n")
                        table.setdefault((algo, cond), []).append(row)
    finally:
        flow.shutdown()
        ray.shutdown()
    for (algo, cond), rows in sorted(table.items()):
        target, budget = ASYNC_TARGETS[algo]
        print(f"{algo:7s} {cond:5s} (to {target:.0f} within {budget}): {summary(rows)}")


if __name__ == "__main__":
    main()

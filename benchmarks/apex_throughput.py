"""Ape-X throughput: env steps sampled/s and trained/s of the Ape-X plan with 2 workers.

Three measurements on the same 2 cores, in one run:

1. raw: random actions stepping the same vector env in 2 plain processes (``sampling.py``);
2. rollouts: ``parallel_rollouts(mode="async")`` over 2 Ray rollout workers with the DQN
   policy (epsilon-greedy inference, n-step postprocessing), nothing else;
3. apex: the whole Ape-X plan (2 workers, 2 replay shards, learner thread) from the tuned
   CartPole config: sampled/s, trained/s (replayed transitions learned on per second), and
   how busy the driver process is (plan loop + learner thread).

Prints each rate and the ratios apex sampled / rollouts, apex sampled / raw. Run:
``python benchmarks/apex_throughput.py [--seconds 20]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from rlflow import flow
from rlflow.algorithms import ApexConfig, tuned_config
from rlflow.algorithms.apex import apex_plan
from rlflow.algorithms.dqn.policy import DQNPolicy
from rlflow.ops import keys, parallel_rollouts
from rlflow.workers import WorkerSet
from sampling import raw_steps_per_s


def rollouts_steps_per_s(config: ApexConfig, seconds: float) -> float:
    """Env steps/s read from ``parallel_rollouts(async)`` over the config's workers."""
    workers = WorkerSet(config, DQNPolicy)
    rollouts = parallel_rollouts(workers, mode="async", num_async=2)
    for _ in range(6):
        next(rollouts)
    ctx = rollouts.metrics
    start_steps = ctx.counters[keys.NUM_ENV_STEPS_SAMPLED]
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        next(rollouts)
    elapsed = time.perf_counter() - start
    steps = ctx.counters[keys.NUM_ENV_STEPS_SAMPLED] - start_steps
    workers.stop()
    return steps / elapsed


def apex_rates(config: ApexConfig, seconds: float) -> dict[str, float]:
    """Sampled and trained env steps/s of the Ape-X plan after training has started."""
    workers = WorkerSet(config, DQNPolicy)
    plan = apex_plan(workers, config)
    first = next(plan)  # learning_starts reached and one result out
    start, cpu_start = time.perf_counter(), time.process_time()
    last: dict[str, Any] = first
    while time.perf_counter() - start < seconds:
        last = next(plan)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    workers.stop()
    sampled = last["num_env_steps_sampled"] - first["num_env_steps_sampled"]
    trained = last["num_env_steps_trained"] - first["num_env_steps_trained"]

    def learn_s(result: dict[str, Any]) -> float:
        stats = result["info"]["learner_thread"]
        return float(stats["learn_ms"] * stats["num_batches"] / 1000.0)

    learner_cpu = learn_s(last) - learn_s(first)
    return {
        "sampled": sampled / elapsed,
        "trained": trained / elapsed,
        "driver_cores": cpu / elapsed,
        "learner_cores": learner_cpu / elapsed,
    }


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    config = tuned_config("apex", "CartPole-v1", min_steps_per_iteration=1000)
    assert isinstance(config, ApexConfig)
    raw = raw_steps_per_s(config.num_envs_per_worker, args.seconds)
    flow.init(backend="ray", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rollouts = rollouts_steps_per_s(config, args.seconds)
        apex = apex_rates(config, args.seconds)
    finally:
        flow.shutdown()
    print(f"{'what':<34} {'env steps/s':>12}")
    print(f"{'raw env stepping (2 processes)':<34} {raw:>12,.0f}")
    print(f"{'rollouts only (2 DQN workers)':<34} {rollouts:>12,.0f}")
    print(f"{'apex sampled (2 workers, 2 shards)':<34} {apex['sampled']:>12,.0f}")
    print(f"{'apex trained (learner thread)':<34} {apex['trained']:>12,.0f}")
    print(f"apex sampled / rollouts only: {apex['sampled'] / rollouts:.2f}")
    print(f"apex sampled / raw env stepping: {apex['sampled'] / raw:.2f}")
    print(f"apex trained / sampled: {apex['trained'] / apex['sampled']:.2f}")
    print(
        f"driver process busy: {apex['driver_cores']:.2f} cores, of which the learner "
        f"thread's learn_on_batch (wall time) {apex['learner_cores']:.2f}"
    )


if __name__ == "__main__":
    main()

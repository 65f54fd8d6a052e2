"""IMPALA throughput: env frames/s sampled and trained by the IMPALA plan, vs raw stepping.

Two measurements, one after the other, on the same machine:

1. raw: random actions stepping the same vector env (CartPole-v1, ``--envs`` per process) in
   ``--workers`` plain processes (``sampling.py``), nothing else;
2. impala: the whole IMPALA plan from the tuned CartPole config with ``--workers`` Ray rollout
   workers (Ray gets ``--workers`` CPUs) and the learner thread in the driver: env steps
   sampled/s, trained/s, and the learner's input queue occupancy (mean batches waiting when the
   learner takes one; the queue holds ``learner_queue_size``).

Prints each rate, the ratio impala sampled / raw, and the queue occupancy. Run::

    python benchmarks/impala_throughput.py [--workers 2] [--seconds 20] [--envs 4]

``ALE/Pong-v5`` is not measured: ``ale_py`` is not installed in this environment.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from rlflow import flow
from rlflow.algorithms import IMPALAConfig, tuned_config
from rlflow.algorithms.impala import impala_plan
from rlflow.policy.impala import VTracePolicy
from rlflow.workers import WorkerSet
from sampling import raw_steps_per_s


def impala_rates(config: IMPALAConfig, seconds: float) -> dict[str, float]:
    """Sampled and trained env steps/s of the IMPALA plan, and its learner queue occupancy."""
    workers = WorkerSet(config, VTracePolicy)
    plan = impala_plan(workers, config)
    first = next(plan)  # actors started, envs built, the learner has trained
    start = time.perf_counter()
    last: dict[str, Any] = first
    occupancy: list[float] = []
    while time.perf_counter() - start < seconds:
        last = next(plan)
        occupancy.append(last["info"]["learner_thread"]["inqueue_size_mean"])
    elapsed = time.perf_counter() - start
    workers.stop()
    sampled = last["num_env_steps_sampled"] - first["num_env_steps_sampled"]
    trained = last["num_env_steps_trained"] - first["num_env_steps_trained"]
    return {
        "sampled": sampled / elapsed,
        "trained": trained / elapsed,
        "queue": sum(occupancy) / max(len(occupancy), 1),
        "learn_ms": float(last["info"]["learner_thread"]["learn_ms"]),
    }


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--envs", type=int, default=4)
    args = parser.parse_args()
    config = tuned_config(
        "impala",
        "CartPole-v1",
        num_workers=args.workers,
        num_envs_per_worker=args.envs,
        min_steps_per_iteration=2000,
    )
    assert isinstance(config, IMPALAConfig)
    raw = raw_steps_per_s(args.envs, args.seconds, processes=args.workers)
    flow.init(backend="ray", num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    try:
        impala = impala_rates(config, args.seconds)
    finally:
        flow.shutdown()
    n = args.workers
    print(f"{'what':<40} {'env steps/s':>12}")
    print(f"{f'raw env stepping ({n} processes)':<40} {raw:>12,.0f}")
    print(f"{f'impala sampled ({n} workers)':<40} {impala['sampled']:>12,.0f}")
    print(f"{'impala trained (learner thread)':<40} {impala['trained']:>12,.0f}")
    print(f"impala sampled / raw env stepping: {impala['sampled'] / raw:.2f}")
    print(f"impala trained / sampled: {impala['trained'] / impala['sampled']:.2f}")
    print(
        f"learner queue occupancy: {impala['queue']:.2f} of {config.learner_queue_size} "
        f"batches waiting; {impala['learn_ms']:.0f} ms per learn_on_batch "
        f"({config.num_sgd_iter} passes over {config.train_batch_size} steps)"
    )


if __name__ == "__main__":
    main()

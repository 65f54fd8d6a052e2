"""IMPALA throughput: env frames/s sampled and trained by the IMPALA plan, vs raw stepping.

Two measurements, one after the other, on the same machine:

1. raw: random actions stepping the same vector env (``--env``, ``--envs`` per process) in
   ``--workers`` plain processes (``sampling.py``), nothing else;
2. impala: the whole IMPALA plan from the tuned config of ``--env`` run by `rlflow.Trainer` with
   ``--workers`` Ray rollout workers (Ray gets ``--workers`` CPUs) and the learner thread in the
   driver: env steps sampled/s, trained/s, and the learner's input queue occupancy (mean batches
   waiting when the learner takes one; the queue holds ``learner_queue_size``).

Prints each rate, the ratio impala sampled / raw, and the queue occupancy. For ``ALE/...`` ids
(DeepMind-wrapped, 4 frames per env step) frames/s are printed too. Run::

    python benchmarks/impala_throughput.py [--env CartPole-v1] [--workers 2] [--seconds 20]
        [--envs N (default: the tuned config's num_envs_per_worker)]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from profiling import profiled
from rlflow import Trainer, flow
from rlflow.algorithms import IMPALAConfig, tuned_config
from sampling import raw_steps_per_s


class PlanRates(NamedTuple):
    """What an actor-learner plan (IMPALA, APPO) did in one timed window."""

    sampled: float
    """Env steps sampled per second."""
    trained: float
    """Env steps trained per second (by the learner thread)."""
    queue: float
    """Mean batches waiting in the learner's input queue when it took one."""
    learn_ms: float
    """Mean milliseconds per ``learn_on_batch`` (the last result's)."""


def actor_learner_rates(
    algo: str,
    config: IMPALAConfig,
    seconds: float,
    *,
    profile: str | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> PlanRates:
    """Rates of ``algo``'s plan ("impala" or "appo") run by `rlflow.Trainer` on the running flow
    backend for ``seconds`` after its first result (actors started, envs built, the learner has
    trained); stops the trainer. With ``profile`` (a path prefix), the window is profiled
    (`profiling.profiled`: the driver's threads, a rollout worker and a learner actor).
    ``on_result`` is called with every result, the first included (`peers.py` prints them)."""
    report = on_result or (lambda result: None)
    with Trainer(algo, config=config) as trainer:
        first = last = trainer.train()
        report(first)
        start = time.perf_counter()
        occupancy: list[float] = []
        with profiled(profile, seconds, actors=("RolloutWorker", "Learner")):
            while time.perf_counter() - start < seconds:
                last = trainer.train()
                report(last)
                occupancy.append(last["info"]["learner_thread"]["inqueue_size_mean"])
            elapsed = time.perf_counter() - start
    sampled = last["num_env_steps_sampled"] - first["num_env_steps_sampled"]
    trained = last["num_env_steps_trained"] - first["num_env_steps_trained"]
    return PlanRates(
        sampled=sampled / elapsed,
        trained=trained / elapsed,
        queue=sum(occupancy) / max(len(occupancy), 1),
        learn_ms=float(last["info"]["learner_thread"]["learn_ms"]),
    )


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--envs", type=int, default=None)
    parser.add_argument("--env", default="CartPole-v1", help="an id with a tuned IMPALA config")
    args = parser.parse_args()
    overrides: dict[str, Any] = {"num_workers": args.workers, "min_steps_per_iteration": 2000}
    if args.envs is not None:
        overrides["num_envs_per_worker"] = args.envs
    config = tuned_config("impala", args.env, **overrides)
    assert isinstance(config, IMPALAConfig)
    envs = config.num_envs_per_worker
    raw = raw_steps_per_s(envs, args.seconds, processes=args.workers, env_id=args.env)
    flow.init(backend="ray", num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    try:
        impala = actor_learner_rates("impala", config, args.seconds)
    finally:
        flow.shutdown()
    n = args.workers
    skip = 4 if args.env.startswith("ALE/") else 1  # make_atari: 4 frames per env step
    print(f"{args.env}: {n} workers x {envs} envs, fragments of {config.rollout_fragment_length}")
    print(f"{'what':<40} {'env steps/s':>12} {'frames/s':>10}")
    rows = [
        (f"raw env stepping ({n} processes)", raw),
        (f"impala sampled ({n} workers)", impala.sampled),
        ("impala trained (learner thread)", impala.trained),
    ]
    for what, rate in rows:
        print(f"{what:<40} {rate:>12,.0f} {rate * skip:>10,.0f}")
    print(f"impala sampled / raw env stepping: {impala.sampled / raw:.2f}")
    print(f"impala trained / sampled: {impala.trained / impala.sampled:.2f}")
    print(
        f"learner queue occupancy: {impala.queue:.2f} of {config.learner_queue_size} "
        f"batches waiting; {impala.learn_ms:.0f} ms per learn_on_batch "
        f"({config.num_sgd_iter} passes over {config.train_batch_size} steps)"
    )


if __name__ == "__main__":
    main()

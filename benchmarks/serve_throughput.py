"""External simulators: env steps/s a run samples through `rlflow serve`, against stepping the
same env in process.

One rollout worker (PG's default policy, fragments of ``--fragment`` steps) samples CartPole-v1
for ``--seconds``:

- **in process**: the worker steps ``--clients`` CartPole envs itself (the baseline);
- **remote inference**: its envs are a `rlflow.serve.PolicyServer`'s, stepped by
  ``examples/serve_cartpole_client.py --envs N`` in a separate process (one HTTP round trip per
  step and client);
- **local inference**: the same client with ``--inference local`` (it acts with the served
  policy itself and reports each step with ``log_action``).

For N = 1 and ``--clients``; prints env steps/s (medians of ``--rounds``) and the ratio to in
process. Sampling only: no training between samples, so the rates are the serving path's own.

    python benchmarks/serve_throughput.py [--seconds 5] [--rounds 3] [--clients 4]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

from rlflow import Trainer, flow
from rlflow.algorithms import PGConfig
from rlflow.serve import PolicyServer

CLIENT = Path(__file__).resolve().parents[1] / "examples" / "serve_cartpole_client.py"


def _rate(trainer: Trainer, seconds: float) -> float:
    """Env steps/s the trainer's local worker samples for ``seconds`` (after one warm-up)."""
    worker = trainer.workers.local_worker()
    worker.sample()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += worker.sample().count
    return steps / (time.perf_counter() - start)


def _config(envs: int, fragment: int) -> PGConfig:
    return PGConfig(
        env="CartPole-v1",
        num_workers=0,
        num_envs_per_worker=envs,
        rollout_fragment_length=fragment,
        seed=0,
    )


def in_process(envs: int, args: argparse.Namespace) -> float:
    """The baseline: the worker steps its own envs."""
    with Trainer("pg", config=_config(envs, args.fragment), backend="local") as trainer:
        return _rate(trainer, args.seconds)


def served(envs: int, inference: str, args: argparse.Namespace) -> float:
    """Through a server, its ``envs`` episodes stepped by one client process."""
    env = gym.make("CartPole-v1")
    with PolicyServer(env.observation_space, env.action_space, port=0) as server:
        config = server.configure(_config(envs, args.fragment))
        client: Any = None
        try:
            with Trainer("pg", config=config, backend="local") as trainer:
                server.serve_policy(trainer.export_policy)
                client = subprocess.Popen(
                    [sys.executable, str(CLIENT), "--address", server.address, "--envs",
                     str(envs), "--inference", inference],
                    stdout=subprocess.DEVNULL,
                )  # fmt: skip
                return _rate(trainer, args.seconds)
        finally:
            if client is not None:
                client.kill()
                client.wait()


def main() -> None:
    """Measure each variant ``--rounds`` times, interleaved; print the medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4, help="episodes at once (besides 1)")
    parser.add_argument("--fragment", type=int, default=64)
    args = parser.parse_args()
    flow.init("local")
    variants = {
        "in process": lambda n: in_process(n, args),
        "remote inference": lambda n: served(n, "remote", args),
        "local inference": lambda n: served(n, "local", args),
    }
    rates: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        for n in sorted({1, args.clients}):
            for name, measure in variants.items():
                rates.setdefault((name, n), []).append(measure(n))
    print(f"CartPole-v1, PG's policy, fragments of {args.fragment}, {args.seconds:g} s x "
          f"{args.rounds} rounds (medians)")  # fmt: skip
    print(f"{'variant':<18} {'episodes at once':>16} {'env steps/s':>12} {'vs in process':>14}")
    for (name, n), values in rates.items():
        median = statistics.median(values)
        base = statistics.median(rates[("in process", n)])
        print(f"{name:<18} {n:>16} {median:>12,.0f} {median / base:>14.3f}")
    flow.shutdown()


if __name__ == "__main__":
    main()

"""Sampling throughput: ``parallel_rollouts`` over 2 rollout workers vs raw env stepping.

Both sides use the same 2 cores: the plan reads 2 Ray rollout actors (CartPole-v1, the default
MLP policy with batched inference, postprocessing with GAE); the baseline steps the same vector
env with random actions in 2 plain processes, nothing else. Prints env steps/s of each and the
ratio. Run: ``python benchmarks/sampling.py [--seconds 10] [--envs 8] [--fragment 100]``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import numpy as np

from rlflow import flow
from rlflow.algorithms import PPOConfig
from rlflow.envs import VectorEnv, make_env_creator
from rlflow.ops import keys, parallel_rollouts
from rlflow.policy import PPOPolicy
from rlflow.workers import WorkerSet


def _raw_stepper(args: tuple[int, int, float, str]) -> int:
    """Step a VectorEnv with random actions for ``seconds``; return the env steps taken."""
    num_envs, seed, seconds, env_id = args
    venv = VectorEnv(make_env_creator(env_id), num_envs, seed)
    venv.reset()
    num_actions = int(venv.action_space.n)  # type: ignore[attr-defined]
    rng = np.random.default_rng(seed)
    steps = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(100):
            venv.step(rng.integers(0, num_actions, size=num_envs), copy=False)
        steps += 100 * num_envs
    venv.close()
    return steps


def raw_steps_per_s(
    num_envs: int, seconds: float, processes: int = 2, env_id: str = "CartPole-v1"
) -> float:
    """Env steps/s of ``processes`` processes stepping random actions in ``env_id``.

    ``env_id`` is built by `rlflow.envs.make_env_creator` (``ALE/...`` ids: DeepMind-wrapped,
    so one env step is 4 frames), as the rollout workers build it.
    """
    with mp.get_context("spawn").Pool(processes) as pool:
        pool.map(_raw_stepper, [(num_envs, i, 0.5, env_id) for i in range(processes)])  # warm up
        jobs = [(num_envs, i, seconds, env_id) for i in range(processes)]
        counts = pool.map(_raw_stepper, jobs)
    return sum(counts) / seconds


def plan_steps_per_s(mode: str, num_envs: int, fragment: int, seconds: float) -> float:
    """Env steps/s read from ``parallel_rollouts(mode)`` over 2 Ray rollout workers."""
    config = PPOConfig(
        num_workers=2, num_envs_per_worker=num_envs, rollout_fragment_length=fragment
    )
    workers = WorkerSet(config, PPOPolicy)
    rollouts = parallel_rollouts(workers, mode=mode)  # type: ignore[call-overload]
    for _ in range(3):
        next(rollouts)  # warm up: actors started, envs built
    ctx = rollouts.metrics
    start_steps = ctx.counters[keys.NUM_ENV_STEPS_SAMPLED]
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        next(rollouts)
    elapsed = time.perf_counter() - start
    steps = ctx.counters[keys.NUM_ENV_STEPS_SAMPLED] - start_steps
    workers.stop()
    return steps / elapsed


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--envs", type=int, default=8, help="envs per worker / process")
    parser.add_argument("--fragment", type=int, default=100, help="rollout_fragment_length")
    args = parser.parse_args()
    raw = raw_steps_per_s(args.envs, args.seconds)
    flow.init(backend="ray", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        results = {
            mode: plan_steps_per_s(mode, args.envs, args.fragment, args.seconds)
            for mode in ("bulk_sync", "async")
        }
    finally:
        flow.shutdown()
    print(f"raw random-action stepping, 2 processes x {args.envs} envs: {raw:10.0f} steps/s")
    for mode, rate in results.items():
        print(
            f"parallel_rollouts({mode}), 2 workers x {args.envs} envs, policy + GAE: "
            f"{rate:10.0f} steps/s   ratio to raw: {rate / raw:.2f}"
        )


if __name__ == "__main__":
    main()

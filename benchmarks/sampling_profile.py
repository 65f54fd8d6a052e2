"""One rollout worker's sampling, in this process, beside raw stepping of its envs; and where
its time goes.

``python benchmarks/sampling_profile.py --envs 8 [--seconds 10]`` prints the env steps/s of a
local `RolloutWorker` sampling CartPole-v1 (PPO's default MLP policy, GAE postprocessing,
``rollout_fragment_length`` 100) and of random-action stepping of the same vector env, and
their ratio (no Ray, no second process: the cost of the sampling path itself).

``--summarize RAW`` reads a py-spy ``--format raw`` file of such a run, e.g.::

    py-spy record -r 200 --format raw -o worker8.txt -- \\
        python benchmarks/sampling_profile.py --envs 8 --seconds 15 --only sample
    python benchmarks/sampling_profile.py --summarize worker8.txt

and prints each function's self and total share of the samples under
``RolloutWorker.sample`` (benchmarks/results/profiles/ holds such summaries).

``--cpu-time`` alternates one fragment of the worker with as many raw steps of a vector env
of its own, and counts this process's CPU time of each (`paired_cpu_rates`): on a machine
loaded by others, the ratio that stays comparable. The CPU time is the whole process's, so an
engine's C++ threads (``--vector-env envpool``) count too.

``--env`` (default CartPole-v1; ``ALE/Pong-v5``: PPO's CNN on the DeepMind frames) and
``--vector-env`` (default ``rlflow``) pick the env and its engine on both sides; ``--envs auto``
the number that ``num_envs_per_worker="auto"`` chooses (`rlflow.workers.envs_per_worker`).
"""

from __future__ import annotations

import argparse
import collections
import re
import time
from typing import Any

import numpy as np

ROOT = "RolloutWorker.sample ("


ENV, VECTOR_ENV = "CartPole-v1", "rlflow"
"""The env and engine measured (``--env``, ``--vector-env``)."""


def _venv(num_envs: int) -> Any:
    """A vector env of `ENV` on `VECTOR_ENV`, reset."""
    from rlflow.envs import make_env_creator
    from rlflow.envs.gym_vector import make_vector_env

    venv = make_vector_env(make_env_creator(ENV), num_envs, 0, vector_env=VECTOR_ENV)
    venv.reset()
    return venv


def raw_steps_per_s(num_envs: int, seconds: float) -> float:
    """Random-action stepping of a vector env of ``num_envs`` envs (`ENV` on `VECTOR_ENV`)."""
    venv = _venv(num_envs)
    actions = int(venv.action_space.n)
    rng = np.random.default_rng(0)
    steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            venv.step(rng.integers(0, actions, size=num_envs), copy=False)
        steps += 100 * num_envs
    elapsed = time.perf_counter() - start
    venv.close()
    return steps / elapsed


def _ppo_worker(num_envs: int, fragment: int) -> Any:
    """A local `RolloutWorker` of PPO's default policy on ``num_envs`` envs (`ENV` on
    `VECTOR_ENV`)."""
    from rlflow.algorithms import PPOConfig
    from rlflow.algorithms.ppo.policy import PPOPolicy
    from rlflow.workers import RolloutWorker

    config = PPOConfig(
        env=ENV,
        num_workers=0,
        num_envs_per_worker=num_envs,
        rollout_fragment_length=fragment,
        vector_env=VECTOR_ENV,
    )
    return RolloutWorker(config, PPOPolicy, worker_index=1)


def sample_steps_per_s(num_envs: int, seconds: float, fragment: int = 100) -> float:
    """A local `RolloutWorker` (PPO, CartPole-v1) sampling fragments for ``seconds``."""
    worker = _ppo_worker(num_envs, fragment)
    for _ in range(3):
        worker.sample()
    steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += worker.sample().count
    return steps / (time.perf_counter() - start)


def paired_cpu_rates(num_envs: int, seconds: float, fragment: int = 100) -> tuple[float, float]:
    """``(raw, sampled)`` env steps per second of this process's CPU time, from alternating
    blocks (one fragment of the worker, then the same number of raw steps) over about
    ``seconds`` of wall time: on a loaded machine the CPU time a step costs is what stays
    comparable, and alternation gives both sides the same conditions."""
    worker = _ppo_worker(num_envs, fragment)
    venv = _venv(num_envs)
    actions = int(venv.action_space.n)
    rng = np.random.default_rng(0)
    for _ in range(3):
        worker.sample()
    raw_cpu = sample_cpu = 0.0
    blocks = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or blocks < 3:
        t0 = time.process_time()
        worker.sample()
        t1 = time.process_time()
        for _ in range(fragment):
            venv.step(rng.integers(0, actions, size=num_envs), copy=False)
        t2 = time.process_time()
        sample_cpu += t1 - t0
        raw_cpu += t2 - t1
        blocks += 1
    venv.close()
    steps = blocks * fragment * num_envs
    return steps / raw_cpu, steps / sample_cpu


def summarize(path: str, top: int = 40) -> str:
    """Self and total shares of each function (file without line) in the stacks of a py-spy
    raw file that pass through `ROOT`."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            frames = stack.split(";")
            first = next((i for i, name in enumerate(frames) if name.startswith(ROOT)), None)
            if first is None:
                continue
            names = [re.sub(r":\d+\)$", ")", name) for name in frames[first:]]
            samples += int(count)
            own[names[-1]] += int(count)
            for name in set(names):
                total[name] += int(count)
    lines = [f"{samples} samples under {ROOT}...)", f"{'self%':>6} {'total%':>6}  function"]
    for name, count in total.most_common(top):
        lines.append(f"{100 * own[name] / samples:6.1f} {100 * count / samples:6.1f}  {name}")
    return "\n".join(lines)


def main() -> None:
    """Measure, or summarize a profile."""
    global ENV, VECTOR_ENV
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--envs", default="8", help="envs of the worker, or auto")
    parser.add_argument("--env", default=ENV)
    parser.add_argument("--vector-env", default=VECTOR_ENV)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--only", choices=("raw", "sample"), default=None)
    parser.add_argument("--summarize", metavar="RAW", default=None)
    parser.add_argument(
        "--cpu-time", action="store_true", help="paired blocks, rates per CPU second"
    )
    args = parser.parse_args()
    if args.summarize:
        print(summarize(args.summarize))
        return
    ENV, VECTOR_ENV = args.env, args.vector_env
    if args.envs == "auto":
        from rlflow.algorithms import PPOConfig
        from rlflow.algorithms.ppo.policy import PPOPolicy
        from rlflow.workers.envs_per_worker import resolve_num_envs_per_worker

        config = PPOConfig(env=ENV, num_envs_per_worker="auto", vector_env=VECTOR_ENV)
        args.envs = resolve_num_envs_per_worker(config, PPOPolicy).num_envs_per_worker
        print(f"--envs auto: {args.envs}")
    args.envs = int(args.envs)
    print(f"{ENV} on {VECTOR_ENV!r}, {args.envs} envs")
    if args.cpu_time:
        raw, sample = paired_cpu_rates(args.envs, args.seconds)
        print(f"per CPU second, {args.envs} envs: raw {raw:.0f}, sampled {sample:.0f} steps")
        print(f"ratio: {sample / raw:.3f}")
        return
    raw = sample = None
    if args.only != "sample":
        raw = raw_steps_per_s(args.envs, args.seconds)
        print(f"raw stepping, {args.envs} envs: {raw:.0f} steps/s")
    if args.only != "raw":
        sample = sample_steps_per_s(args.envs, args.seconds)
        print(f"RolloutWorker.sample, {args.envs} envs: {sample:.0f} steps/s")
    if raw and sample:
        print(f"ratio: {sample / raw:.3f}")


if __name__ == "__main__":
    main()

"""Sampling throughput: ``parallel_rollouts`` over 2 rollout workers vs raw env stepping.

Both sides use the same 2 cores: the plan reads 2 Ray rollout actors (CartPole-v1, the default
MLP policy with batched inference, postprocessing with GAE); the baseline steps the same vector
env with random actions in 2 plain processes, nothing else. Prints env steps/s of each and the
ratio. Run: ``python benchmarks/sampling.py [--seconds 10] [--envs 8] [--fragment 100]``.

``--vector-env rlflow,gymnasium-sync,gymnasium,envpool`` (and ``--env``) measures each env
engine (`rlflow.envs.gym_vector`, config ``vector_env``): its raw stepping and its sampling
plan, medians of ``--rounds`` paired rounds, each beside rlflow's raw loop and the ratio, with
the load average. ``--modes`` picks the ``parallel_rollouts`` modes (default both);
``--models mlp,lstm,lstm256`` measures the plans with each policy model (`MODELS`: an LSTM
policy carries its state through the sampler, issue 25). With an
``ALE/`` id, ``ale-vector`` is ale_py's C++ ``AtariVectorEnv`` (`rlflow.envs.ale_vector`) and
``envpool`` EnvPool's Atari engine with rlflow's preprocessing (`rlflow.envs.envpool_env`).
``--envs auto`` takes, for each engine, the number ``num_envs_per_worker="auto"`` chooses
(`rlflow.workers.envs_per_worker`, measured here before the rounds) for both sides.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import statistics
import time
from typing import Any

import numpy as np

from rlflow import flow
from rlflow.algorithms import PPOConfig
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.envs import make_env_creator
from rlflow.envs.gym_vector import make_vector_env
from rlflow.ops import keys, parallel_rollouts
from rlflow.workers import WorkerSet


def _raw_stepper(args: tuple[int, int, float, str, str]) -> float:
    """Step a vector env of engine ``vector_env`` with random actions for ``seconds`` (whole
    blocks of 100 steps, so a little longer); return its env steps/s over the time it took."""
    num_envs, seed, seconds, env_id, vector_env = args
    venv = make_vector_env(make_env_creator(env_id), num_envs, seed, vector_env=vector_env)
    venv.reset()
    num_actions = int(venv.action_space.n)
    rng = np.random.default_rng(seed)
    steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            venv.step(rng.integers(0, num_actions, size=num_envs), copy=False)
        steps += 100 * num_envs
    elapsed = time.perf_counter() - start
    venv.close()
    return steps / elapsed


def raw_steps_per_s(
    num_envs: int,
    seconds: float,
    processes: int = 2,
    env_id: str = "CartPole-v1",
    vector_env: str = "rlflow",
) -> float:
    """Env steps/s of ``processes`` processes stepping random actions in ``env_id`` on the
    engine ``vector_env``.

    ``env_id`` is built by `rlflow.envs.make_env_creator` (``ALE/...`` ids: DeepMind-wrapped,
    so one env step is 4 frames), as the rollout workers build it. The sum of each process's
    steps over its own stepping time (until 2026-11-27 the steps of whole 100-step blocks were
    divided by ``seconds``, which overstated slow envs by up to a block).
    """
    with mp.get_context("spawn").Pool(processes) as pool:
        warm = [(num_envs, i, 0.5, env_id, vector_env) for i in range(processes)]
        pool.map(_raw_stepper, warm)
        jobs = [(num_envs, i, seconds, env_id, vector_env) for i in range(processes)]
        rates = pool.map(_raw_stepper, jobs)
    return sum(rates)


def plan_steps_per_s(
    mode: str,
    num_envs: int,
    fragment: int,
    seconds: float,
    env_id: str = "CartPole-v1",
    vector_env: str = "rlflow",
    model: str = "mlp",
) -> float:
    """Env steps/s read from ``parallel_rollouts(mode)`` over 2 Ray rollout workers acting with
    the policy model ``model`` (a key of `MODELS`)."""
    config = PPOConfig(
        env=env_id,
        num_workers=2,
        num_envs_per_worker=num_envs,
        rollout_fragment_length=fragment,
        vector_env=vector_env,
        model=MODELS[model],
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
    return float(steps / elapsed)


MODELS: dict[str, dict[str, Any]] = {
    "mlp": {},
    "lstm": {"use_lstm": True, "lstm_cell_size": 64, "hidden": [64]},
    "lstm256": {"use_lstm": True},
}
"""``--models``: PPO's default MLP (64x64), the LSTM of the tuned StatelessCartPole config (an
MLP of 64 into 64 LSTM units) and the recurrent defaults (256 units after 64x64)."""


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def envs_per_worker(envs: str, env_id: str, vector_env: str) -> int:
    """``--envs``: a number, or ``auto``: what ``num_envs_per_worker="auto"`` chooses for PPO's
    default policy on ``env_id`` and the engine ``vector_env``, measured in this process."""
    if envs != "auto":
        return int(envs)
    from rlflow.workers.envs_per_worker import resolve_num_envs_per_worker

    config = PPOConfig(env=env_id, num_envs_per_worker="auto", vector_env=vector_env)
    return int(resolve_num_envs_per_worker(config, PPOPolicy).num_envs_per_worker)


def measure(args: argparse.Namespace) -> dict[tuple[str, str], list[float]]:
    """``{(engine, "raw" or mode): [steps/s per round]}``, rounds paired over the engines."""
    engines, modes = args.vector_env.split(","), args.modes.split(",")
    counts = {e: envs_per_worker(args.envs, args.env, e) for e in engines}
    if args.envs == "auto":
        print(f"--envs auto: {counts}", flush=True)
    rates: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for engine in engines:
            rate = raw_steps_per_s(counts[engine], args.seconds, env_id=args.env, vector_env=engine)
            rates.setdefault((engine, "raw"), []).append(rate)
        flow.init(backend="ray", num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            for engine in engines:
                for mode, model in itertools.product(modes, args.models.split(",")):
                    rate = plan_steps_per_s(
                        mode, counts[engine], args.fragment, args.seconds, args.env, engine, model
                    )
                    what = mode if model == "mlp" else f"{mode}, {model}"
                    rates.setdefault((engine, what), []).append(rate)
        finally:
            flow.shutdown()
        print(f"round {r + 1}/{args.rounds} done; {_load()}", flush=True)
    return rates


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--envs", default="8", help="envs per worker / process, or auto")
    parser.add_argument("--fragment", type=int, default=100, help="rollout_fragment_length")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--vector-env", default="rlflow", help="engines, comma-separated")
    parser.add_argument("--modes", default="bulk_sync,async")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--models", default="mlp", help=f"policy models of the plans, from {sorted(MODELS)}"
    )
    args = parser.parse_args()
    unknown = sorted(set(args.models.split(",")) - set(MODELS))
    if unknown:
        parser.error(f"--models: unknown {unknown}; allowed: {sorted(MODELS)}")
    print(f"{args.env}, 2 processes / workers x {args.envs} envs; before: {_load()}")
    rates = {k: statistics.median(v) for k, v in measure(args).items()}
    engines = args.vector_env.split(",")
    base = rates[(engines[0], "raw")]
    print(f"medians of {args.rounds} round(s); ratios to {engines[0]!r} raw ({base:.0f}/s)")
    for (engine, what), rate in rates.items():
        name = "raw random-action stepping" if what == "raw" else f"parallel_rollouts({what})"
        name += " + policy + GAE" if what != "raw" else ""
        print(f"{engine:16s} {name:45s} {rate:10.0f} steps/s   ratio: {rate / base:.2f}")
    print(f"after: {_load()}")


if __name__ == "__main__":
    main()

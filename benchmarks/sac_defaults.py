"""SAC with its default config on InvertedPendulum-v5: env steps/s of ``rlflow train sac`` beside
Stable-Baselines3's ``SAC("MlpPolicy", env)``, same env steps.

rlflow's run is the command line a user types, in this process: ``rlflow train sac --env
InvertedPendulum-v5 --backend local --no-tuned --stop-timesteps STEPS``, so its seconds include
what reporting costs (the progress line, ``progress.jsonl``, ``progress.csv`` and TensorBoard
rows of every iteration) and its final checkpoint; it reports the iterations and progress lines
that took. SB3's run is ``SAC("MlpPolicy", env, seed=SEED, device="cpu").learn(STEPS)``, model
building included. Both use one torch thread. The defaults differ where the libraries' do:
rlflow samples with its policy for 1,500 steps before learning (``learning_starts``), SB3 acts at
random for 100; both then take one gradient step of a 256-transition batch per env step, with
(256, 256) networks. Each round runs rlflow, then SB3; the script prints every run, the medians
over ``--rounds`` and the rlflow/SB3 ratio of env steps/s (above 1: rlflow is faster). Without
stable-baselines3 it prints that SB3's row was skipped and how to install it. Seconds are from a
small, shared machine: the 1-minute load average is printed with every run.

    python benchmarks/sac_defaults.py [--steps 3000] [--rounds 3] [--seed 0]

``--to-return 900 --seeds 0,1,2`` measures sample efficiency instead: each library, seed by
seed, until the mean return of its last 10 episodes reaches 900 (or ``--cap`` env steps): the
env steps and wall seconds it took. rlflow's run is ``rlflow train sac ... --stop-reward 900
--set metrics_num_episodes_for_smoothing=10`` (checked after every iteration, so it may run up
to one iteration past the episode that reached it); SB3's stops in a callback at the end of the
episode that brought its last-10 mean to 900. ``--set KEY=VALUE`` (repeatable) changes rlflow's
config, e.g. ``--set learning_starts=100`` for SB3's warm-up length.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch

from rlflow.cli import main as rlflow_main

ENV_ID = "InvertedPendulum-v5"
TRAIN_BATCH = 256
"""Transitions per gradient step in both libraries' defaults."""


class Run(NamedTuple):
    """One library's run: env steps, wall seconds, gradient steps, iterations and progress lines
    (rlflow; 0 for SB3), and the 1-minute load average at its start."""

    library: str
    steps: int
    seconds: float
    updates: int
    iterations: int
    lines: int
    load: float
    mean: float = float("nan")
    """rlflow's ``episode_return_mean`` at the end (NaN for SB3's throughput runs)."""

    @property
    def rate(self) -> float:
        """Env steps per wall-clock second."""
        return self.steps / self.seconds


def load1() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


SMOOTHING = 10
"""Episodes in the mean that ``--to-return`` stops on."""


class Reached(NamedTuple):
    """A ``--to-return`` run: whether the last-10 mean reached the target, the env steps and
    wall seconds taken, and the last-10 mean at the end."""

    library: str
    seed: int
    reached: bool
    steps: int
    seconds: float
    mean: float


def run_rlflow(
    steps: int, seed: int, stop_reward: float | None = None, sets: tuple[str, ...] = ()
) -> Run:
    """``rlflow train sac`` with the default config (``sets`` changed) until ``steps`` env steps
    were sampled or, with ``stop_reward``, the last-10 mean reached it."""
    load = load1()
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) / "run"
        argv = ["train", "sac", "--env", ENV_ID, "--backend", "local", "--no-tuned"]
        argv += ["--seed", str(seed), "--stop-timesteps", str(steps), "--out", str(out_dir)]
        if stop_reward is not None:
            argv += ["--stop-reward", str(stop_reward)]
            argv += ["--set", f"metrics_num_episodes_for_smoothing={SMOOTHING}"]
        for item in sets:
            argv += ["--set", item]
        stdout = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(stdout):
            code = rlflow_main(argv)
        seconds = time.perf_counter() - start
        if code != 0:
            raise SystemExit(f"rlflow train sac exited with {code}:\n{stdout.getvalue()}")
        rows = (out_dir / "progress.jsonl").read_text().splitlines()
        last = json.loads(rows[-1])
    lines = len(stdout.getvalue().splitlines())
    updates = last["num_env_steps_trained"] // TRAIN_BATCH
    mean = float(last.get("episode_return_mean", float("nan")))
    return Run(
        "rlflow", last["num_env_steps_sampled"], seconds, updates, len(rows), lines, load, mean
    )


def rlflow_to_return(target: float, cap: int, seed: int, sets: tuple[str, ...]) -> Reached:
    """rlflow's SAC until its last-10 mean reaches ``target`` or ``cap`` env steps."""
    run = run_rlflow(cap, seed, stop_reward=target, sets=sets)
    return Reached("rlflow", seed, run.mean >= target, run.steps, run.seconds, run.mean)


def sb3_to_return(target: float, cap: int, seed: int) -> Reached | None:
    """SB3's SAC with its defaults until its last-10 mean reaches ``target`` or ``cap`` env
    steps; None without stable-baselines3."""
    try:
        import gymnasium as gym
        from stable_baselines3 import SAC
        from stable_baselines3.common.callbacks import BaseCallback
    except ImportError:
        return None

    class StopAtReturn(BaseCallback):
        """Sums rewards per episode; stops training once the last 10 episodes' mean >= target."""

        def __init__(self) -> None:
            super().__init__()
            self.episode_return = 0.0
            self.returns: list[float] = []

        def _on_step(self) -> bool:
            self.episode_return += float(self.locals["rewards"][0])
            if not self.locals["dones"][0]:
                return True
            self.returns.append(self.episode_return)
            self.episode_return = 0.0
            last = self.returns[-SMOOTHING:]
            return not (len(last) == SMOOTHING and statistics.fmean(last) >= target)

    callback = StopAtReturn()
    start = time.perf_counter()
    model = SAC("MlpPolicy", gym.make(ENV_ID), seed=seed, device="cpu")
    model.learn(total_timesteps=cap, callback=callback)
    seconds = time.perf_counter() - start
    last = callback.returns[-SMOOTHING:]
    mean = statistics.fmean(last) if last else float("nan")
    reached = len(last) == SMOOTHING and mean >= target
    return Reached("SB3", seed, reached, model.num_timesteps, seconds, mean)


def to_return(args: argparse.Namespace) -> None:
    """``--to-return``: env steps and seconds to the target, seed by seed, both libraries."""
    seeds = [int(s) for s in args.seeds.split(",")]
    sets = tuple(args.set)
    results: dict[str, list[Reached]] = {"rlflow": [], "SB3": []}
    runners: dict[str, Callable[[int], Reached | None]] = {
        "rlflow": lambda seed: rlflow_to_return(args.to_return, args.cap, seed, sets),
        "SB3": lambda seed: sb3_to_return(args.to_return, args.cap, seed),
    }
    chosen = [runners[name] for name in args.libraries.split(",")]
    for seed in seeds:
        for runner in chosen:
            reached = runner(seed)
            if reached is None:
                print("  SB3    skipped: stable-baselines3 is not installed", flush=True)
                continue
            results[reached.library].append(reached)
            print(
                f"  {reached.library:6} seed {seed}: "
                f"{'reached' if reached.reached else 'NOT reached'} a last-{SMOOTHING} mean of "
                f"{args.to_return:g} ({reached.mean:.1f}) at {reached.steps} env steps, "
                f"{reached.seconds:.1f} s (load {load1()})",
                flush=True,
            )
    changed = f" with {' '.join(sets)}" if sets else ""
    print(f"\n{ENV_ID}, SAC defaults{changed}, to a last-{SMOOTHING} mean of {args.to_return:g}:")
    for library, runs in results.items():
        if runs:
            print(
                f"  {library:6} median {statistics.median(r.steps for r in runs):.0f} env steps "
                f"(reached {sum(r.reached for r in runs)} of {len(runs)}), median "
                f"{statistics.median(r.seconds for r in runs):.1f} s"
            )


def run_sb3(steps: int, seed: int) -> Run | None:
    """SB3's SAC with its defaults for ``steps`` env steps; None without stable-baselines3."""
    try:
        import gymnasium as gym
        from stable_baselines3 import SAC
    except ImportError:
        return None
    load = load1()
    start = time.perf_counter()
    model = SAC("MlpPolicy", gym.make(ENV_ID), seed=seed, device="cpu")
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - start
    return Run("SB3", model.num_timesteps, seconds, model._n_updates, 0, 0, load)


def show(run: Run) -> None:
    """Print one run."""
    extra = f", {run.iterations} iterations, {run.lines} stdout lines" if run.iterations else ""
    print(
        f"  {run.library:6} {run.steps} env steps in {run.seconds:.1f} s: "
        f"{run.rate:.1f} env steps/s, {run.updates} gradient steps{extra} (load {run.load})",
        flush=True,
    )


def main() -> None:
    """Parse arguments, run the rounds, print the medians and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="env steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of rlflow then SB3")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--to-return", type=float, default=None, help="e.g. 900")
    parser.add_argument("--seeds", default="0,1,2", help="with --to-return")
    parser.add_argument("--cap", type=int, default=40_000, help="with --to-return: env steps")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--libraries", default="rlflow,SB3", choices=("rlflow,SB3", "rlflow", "SB3", "SB3,rlflow")
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.to_return is not None:
        to_return(args)
        return
    runs: dict[str, list[Run]] = {"rlflow": [], "SB3": []}
    for i in range(args.rounds):
        print(f"round {i + 1}/{args.rounds}", flush=True)
        for library, fn in (("rlflow", run_rlflow), ("SB3", run_sb3)):
            run = fn(args.steps, args.seed)
            if run is not None:
                runs[library].append(run)
                show(run)
    print(f"\nmedians over {args.rounds} rounds, SAC defaults, {ENV_ID}, {args.steps} env steps:")
    rates = {lib: statistics.median(r.rate for r in rs) for lib, rs in runs.items() if rs}
    rlflow_runs = runs["rlflow"]
    print(
        f"  rlflow {rates['rlflow']:.1f} env steps/s, "
        f"{statistics.median(r.iterations for r in rlflow_runs):.0f} iterations, "
        f"{statistics.median(r.lines for r in rlflow_runs):.0f} stdout lines"
    )
    if "SB3" not in rates:
        print(
            "  SB3    skipped: stable-baselines3 is not installed "
            '(pip install stable-baselines3, or pip install -e ".[bench]")'
        )
        return
    print(f"  SB3    {rates['SB3']:.1f} env steps/s")
    print(f"  rlflow/SB3 env steps/s: {rates['rlflow'] / rates['SB3']:.2f}x")


if __name__ == "__main__":
    main()

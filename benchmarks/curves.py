"""Learning curves of the algorithms on their tuned envs, several seeds each (the docs' results).

Each case is trained the way a user trains it, with the command line and its shipped tuned
config (``rlflow train ALGO --env ENV --seed S --stop-timesteps BUDGET``), once per seed, one run
after the other; ``rlflow plot`` then draws the seeds' mean with a min/max band. Under ``--out``
(default ``benchmarks/results/curves``):

- ``<algo>_<env>.png``: the picture (``/`` of a namespaced env id written ``-``);
- ``summary.json``: per case, each seed's final return (the last result's
  ``episode_return_mean``: the mean over the config's ``metrics_num_episodes_for_smoothing``
  last training episodes), its best, the env steps at which the return first reached the case's
  target (the figure the learning tests hold; None if never), env steps, wall seconds and the
  1-minute load average at its start and end (the machine may be shared: read seconds with it); with
  the machine (CPU model, cores, GPU) and the versions of Python, rlflow, torch, Ray and
  Gymnasium. A run of a subset (``--only``) updates its cases and keeps the others.

A case that learns from recorded experience (bc, marwil, cql) first records it once, with the
recording algorithm's own tuned config (``--output``); its budget and x axis count rows trained
(bc, marwil: ``num_env_steps_trained``) or recorded rows read (cql, which trains a fixed number
of batches per row read: ``num_env_steps_sampled``), its return is its greedy evaluation's.

The budget of a case is the env steps its learning test allows (or, where no test learns on it,
what this machine affords), so a curve shows where a tuned config stands at the budget CI holds.

    python benchmarks/curves.py --list
    python benchmarks/curves.py [--only ppo:CartPole-v1,dqn] [--seeds 0,1,2] [--backend ray]
        [--out DIR] [--runs DIR] [--quick]

``--quick`` divides every budget by 20 (a check of the script, not a result).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlflow.loggers import read_progress

RESULTS = Path(__file__).resolve().parent / "results" / "curves"


@dataclass(frozen=True)
class Recording:
    """A run whose sampled batches are written (``--output``) for an offline case to read."""

    algo: str
    env: str
    steps: int
    """Env steps recorded (seed 0, from the algorithm's first step: its whole learning run)."""

    def describe(self) -> str:
        """How the data was made, for the summary."""
        return f"rlflow train {self.algo} --env {self.env} --seed 0 --stop-timesteps {self.steps}"


@dataclass(frozen=True)
class Case:
    """One algorithm on one env: the budget it runs for and the return it is expected to reach."""

    algo: str
    env: str
    budget: int
    """Env steps per seed."""
    target: float | None
    """The return its learning test holds (None: no test holds one)."""
    note: str = ""
    """Where the budget and target come from."""
    backend: str = "local"
    """Where its learning test runs it (the asynchronous plans: on Ray)."""
    y_column: str = "episode_return_mean"
    """The return drawn (a progress column; nested: ``a/b``)."""
    policy: str | None = None
    """A multi-agent case draws one policy's ``policy_reward_mean``; its key names it."""
    data: Recording | None = None
    """For an algorithm that learns from recorded experience: the run that records it."""
    x: str = "num_env_steps_sampled"
    """The progress column of the x axis, which the budget counts: env steps sampled (for
    cql, recorded rows read), or rows trained (bc and marwil, which count none read)."""

    @property
    def key(self) -> str:
        """``algo:env`` (``algo:env:policy``), how ``--only`` names it."""
        return ":".join([self.algo, self.env, *([self.policy] if self.policy else [])])

    @property
    def file_stem(self) -> str:
        """The picture's file name without suffix."""
        return self.key.replace("/", "-").replace(":", "_")

    @property
    def y(self) -> str:
        """The progress column of the y axis: the return, or a policy's."""
        return f"policy_reward_mean/{self.policy}" if self.policy else self.y_column


STATELESS = "rlflow/StatelessCartPole-v1"
LEARNING = "tests/algorithms/test_learning.py"
MEMORY = "tests/algorithms/test_learning_memory.py"
ASYNC = "rlflow.testing.learning.ASYNC_TARGETS (Ray)"
PENDULUM = "tests/algorithms/twin_q/test_learning.py"
HOPPER = "tests/algorithms/ppo/test_learning_hopper.py (SB3's defaults' 1,117 at 200k)"
MUJOCO = "what a 2-core CPU affords in minutes (the zoo trains 1M steps)"
ANT = (
    f"{MUJOCO}; at 200k SB3 with the zoo's Ant settings is no further: -5.2, seed 0 "
    "(benchmarks/ppo_mujoco.py --env Ant-v5 --tuned --only sb3, 2026-11-29)"
)
OFFLINE = (
    "tests/algorithms/test_learning_offline.py's targets; here the data is the whole learning "
    "run of the recording algorithm, from its random start to its end"
)
PPO_DQN = (
    "tests/algorithms/ppo_dqn/test_ppo_dqn.py's target, each policy's return with poles respawning "
    "(there within 300k steps; a third of them here: ~100 env steps/s on a loaded 2-core CPU)"
)
DDPPO = "tests/algorithms/ddppo/test_learning_ddppo.py"
APEX_TD3 = "tests/algorithms/twin_q/test_apex_td3.py (apex_td3's; apex_ddpg at the same)"
MAML = "benchmarks/maml_adaptation.py; the return after one inner adaptation step"
TRAINED = "num_env_steps_trained"
EVAL = "evaluation/episode_return_mean"
"""What an offline run's return is: its greedy evaluation's (it samples no episodes)."""
ADAPTED = "info/maml/episode_return_mean_adapt_1"
"""MAML's return after one inner adaptation step on the meta-batch's tasks."""
PPO_RUN = Recording("ppo", "CartPole-v1", 100_000)
SAC_RUN = Recording("sac", "Pendulum-v1", 20_000)
CASES = (
    Case("pg", "CartPole-v1", 300_000, 150.0, LEARNING),
    Case("a2c", "CartPole-v1", 500_000, 400.0, LEARNING),
    Case("a3c", "CartPole-v1", 500_000, 300.0, ASYNC, "ray"),
    Case("ppo", "CartPole-v1", 100_000, 475.0, LEARNING),
    Case("dqn", "CartPole-v1", 100_000, 475.0, "tests/algorithms/dqn/test_dqn_apex.py (seed 0)"),
    Case("apex", "CartPole-v1", 400_000, 300.0, ASYNC, "ray"),
    Case("impala", "CartPole-v1", 500_000, 400.0, ASYNC, "ray"),
    Case("appo", "CartPole-v1", 500_000, 400.0, ASYNC, "ray"),
    Case("ppo", "Pendulum-v1", 200_000, -400.0, "benchmarks/ppo_pendulum.py"),
    Case("sac", "Pendulum-v1", 20_000, -250.0, PENDULUM),
    Case("td3", "Pendulum-v1", 20_000, -250.0, PENDULUM),
    Case("ppo", STATELESS, 300_000, 300.0, MEMORY),
    Case("impala", STATELESS, 500_000, 150.0, MEMORY),
    Case("appo", STATELESS, 500_000, 150.0, MEMORY),
    Case("r2d2", STATELESS, 300_000, 150.0, MEMORY),
    Case("apex_r2d2", STATELESS, 450_000, 150.0, MEMORY),
    Case("ppo", "Hopper-v5", 200_000, 1117.0, HOPPER),
    Case("ppo", "HalfCheetah-v5", 200_000, None, MUJOCO),
    Case("ppo", "Ant-v5", 200_000, None, ANT),
    Case("bc", "CartPole-v1", 300_000, 450.0, OFFLINE, y_column=EVAL, data=PPO_RUN, x=TRAINED),
    Case("marwil", "CartPole-v1", 300_000, 450.0, OFFLINE, y_column=EVAL, data=PPO_RUN, x=TRAINED),
    Case("cql", "Pendulum-v1", 20_000, -400.0, OFFLINE, y_column=EVAL, data=SAC_RUN),
    Case("ppo_dqn", "multi_cartpole", 100_000, 150.0, PPO_DQN, policy="ppo_policy"),
    Case("ppo_dqn", "multi_cartpole", 100_000, 150.0, PPO_DQN, policy="dqn_policy"),
    Case("maml", "rlflow/PointNav2D-v0", 160_000, None, MAML, y_column=ADAPTED),
    Case("es", "CartPole-v1", 500_000, 475.0, "tests/algorithms/es/test_learning_es.py", "ray"),
    Case("ars", "Swimmer-v5", 1_000_000, 325.0, "tests/algorithms/es/test_learning_ars.py"),
    Case("ddppo", "CartPole-v1", 150_000, 475.0, DDPPO, "ray"),
    Case("apex_td3", "Pendulum-v1", 40_000, -250.0, APEX_TD3, "ray"),
    Case("apex_ddpg", "Pendulum-v1", 40_000, -250.0, APEX_TD3, "ray"),
)
"""The cases this script runs: every algorithm with a tuned config on a CartPole- or
Pendulum-sized env, PPO on the MuJoCo envs at 200k steps, ARS on Swimmer. bc, marwil and cql
learn from recorded experience: the whole run of the recording algorithm (seed 0), recorded once
with ``--output``; their budget counts rows trained (cql: rows read), their return is the
evaluation's. Not here:
the games (a zero-sum return is 0 for any policy: tests/algorithms/test_learning_games.py), SAC
and TD3 on MuJoCo (~27 env steps/s here: benchmarks/sac_halfcheetah.py) and the Atari configs
(hours on a 2-core CPU: benchmarks/impala_throughput.py)."""


def _rlflow() -> list[str]:
    """The ``rlflow`` command of this interpreter's environment."""
    return [str(Path(sys.executable).with_name("rlflow"))]


def _train(args: list[str], cwd: Path) -> float:
    """Run ``rlflow train ARGS`` in ``cwd`` (MuJoCo writes its log file there); its seconds."""
    command = [*_rlflow(), "train", *args]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return time.monotonic() - start


def _record(recording: Recording, runs: Path) -> Path:
    """The experience ``recording`` writes (recorded once into ``runs``, then reused)."""
    data = runs / f"data_{recording.algo}_{recording.env.replace('/', '-')}_{recording.steps}"
    if not (data / "DONE").is_file():
        args = recording.describe().split()[2:]
        seconds = _train([*args, "--output", str(data), "--out", str(data) + "_run"], runs)
        (data / "DONE").write_text(f"{seconds:.1f}\n")
        print(f"recorded {recording.describe()} in {seconds:.0f} s", flush=True)
    return data


def _run(case: Case, seed: int, budget: int, run_dir: Path, backend: str) -> dict[str, Any]:
    """Train one seed of ``case``; its numbers."""
    args = [
        case.algo, "--env", case.env, "--seed", str(seed), "--stop-timesteps", str(budget),
        "--out", str(run_dir), "--backend", backend, "--logger", "jsonl,csv",
        "--stop-reward", "inf",  # to the budget, past a tuned file's stop (bc's, marwil's)
    ]  # fmt: skip
    if case.data:
        args += ["--set", f"input={_record(case.data, run_dir.parent)}"]
    timing = run_dir / "curves_timing.json"  # a run two cases draw (ppo_dqn's policies) runs once
    if not timing.is_file():
        load = os.getloadavg()[0]
        seconds = _train(args, run_dir.parent)
        timing.write_text(json.dumps([seconds, load, os.getloadavg()[0]]))
    seconds, load, load_end = json.loads(timing.read_text())
    # The reader `rlflow plot` draws the pictures from, so the numbers are the pictures'.
    columns = read_progress(run_dir, (case.x, case.y))
    steps = [int(t) for t in columns[case.x]]
    returns = [(t, g) for t, g in zip(steps, columns[case.y], strict=True) if math.isfinite(g)]
    reached = next((t for t, g in returns if case.target is not None and g >= case.target), None)
    return {
        "seed": seed,
        "final_return": returns[-1][1] if returns else None,
        "best_return": max((g for _, g in returns), default=None),
        "steps_to_target": reached,
        "env_steps": steps[-1] if steps else 0,
        "seconds": round(seconds, 1),
        "load": [round(load, 2), round(load_end, 2)],
    }


def _plot(case: Case, run_dirs: list[Path], out: Path) -> Path:
    """``rlflow plot`` of the seeds: their mean and min/max band."""
    picture = out / f"{case.file_stem}.png"
    command = [*_rlflow(), "plot", *map(str, run_dirs), "-o", str(picture)]
    command += ["--x", case.x, "--y", case.y]
    subprocess.run(command, capture_output=True, text=True, check=True)
    return picture


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """Where the curves were measured: hardware and versions."""
    import gymnasium
    import ray
    import torch

    import rlflow

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "gpu": gpu,
        "python": platform.python_version(),
        "rlflow": rlflow.__version__,
        "torch": torch.__version__,
        "ray": ray.__version__,
        "gymnasium": gymnasium.__version__,
    }


def _selected(only: str | None) -> list[Case]:
    """The cases ``--only`` names (``algo`` or ``algo:env``, comma-separated), else all."""
    if not only:
        return list(CASES)
    names = [n.strip() for n in only.split(",") if n.strip()]
    chosen = [c for c in CASES if c.key in names or c.algo in names]
    unknown = [n for n in names if not any(n in (c.key, c.algo) for c in CASES)]
    if unknown:
        raise SystemExit(f"--only: unknown case(s) {unknown}; see --list")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="cases: algo or algo:env, comma-separated")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument(
        "--backend", choices=("local", "ray"), help="every case's (default: each case's own)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--runs", type=Path, help="keep the run dirs here (default: a temp dir)")
    parser.add_argument("--quick", action="store_true", help="budgets / 20: a check, no result")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    args = parser.parse_args()
    if args.list:
        for case in CASES:
            target = "-" if case.target is None else f"{case.target:g}"
            print(f"{case.key:<40} {case.budget:>9,} steps  target {target:>6}  {case.note}")
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    summary_path = args.out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {"cases": {}}
    summary["machine"] = machine()
    runs = args.runs or Path(tempfile.mkdtemp(prefix="rlflow-curves-"))
    runs.mkdir(parents=True, exist_ok=True)
    for case in _selected(args.only):
        budget = case.budget // 20 if args.quick else case.budget
        backend = args.backend or case.backend
        run_dirs, seeds_out = [], []
        for seed in seeds:
            run_dir = runs / f"{case.algo}_{case.env.replace('/', '-')}_{budget}_s{seed}"
            seeds_out.append(_run(case, seed, budget, run_dir, backend))
            run_dirs.append(run_dir)
            last = seeds_out[-1]
            print(f"{case.key} seed {seed}: final {last['final_return']:.1f}, best "
                  f"{last['best_return']:.1f}, to target {last['steps_to_target']}, "
                  f"{last['env_steps']:,} steps, {last['seconds']:.0f} s", flush=True)  # fmt: skip
        picture = _plot(case, run_dirs, args.out)
        summary["cases"][case.key] = {
            "algo": case.algo,
            "env": case.env,
            "budget": budget,
            "target": case.target,
            "note": case.note,
            "x": case.x,
            "y": case.y,
            "data": case.data.describe() if case.data else None,
            "backend": backend,
            "quick": args.quick,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "picture": picture.name,
            "seeds": seeds_out,
        }
        summary_path.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"wrote {picture} and {summary_path}")


if __name__ == "__main__":
    main()

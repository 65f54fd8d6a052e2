"""PPO's defaults on a MuJoCo env (Hopper-v5), rlflow beside Stable-Baselines3 (or both tuned).

For each seed, one run of each library for the same env-step budget, one after the other:

- ``rlflow``: the command a user types, in this process: ``rlflow train ppo --env ENV --no-tuned
  --backend local --seed SEED --stop-timesteps STEPS --set metrics_num_episodes_for_smoothing=20``
  (``--tuned`` drops ``--no-tuned``: the shipped tuned config, if any; ``--set KEY=VALUE`` adds
  settings, e.g. the old defaults). The local backend runs the rollout workers in this process
  (the same worker classes as on Ray; ``rlflow train`` on Ray gave seed 0's figure exactly).
- ``sb3``: ``PPO("MlpPolicy", ENV, seed=SEED, device="cpu", stats_window_size=20)
  .learn(STEPS)``, SB3's defaults, in a subprocess of this script (peers run only here, each in
  its own process). With ``--tuned``, rl-baselines3-zoo's entry for the env instead (`ZOO`: the
  settings rlflow's tuned file translates, with what rlflow lacks: ``VecNormalize`` of
  observations and rewards, and the policy_kwargs), the env in ``make_vec_env``.

"Return" is the same number on both sides: the mean undiscounted return of the last 20 training
episodes finished when the budget is spent (exploring, stochastic policy; all envs): rlflow's
``episode_return_mean`` of the last iteration with ``metrics_num_episodes_for_smoothing=20``,
and the last 20 of the episodes SB3's ``Monitor`` wrapper recorded, after ``learn`` returns
(what its ``ep_info_buffer`` holds with ``stats_window_size=20``). Each library stops at the
end of the first train batch that reaches the budget (rlflow: ``train_batch_size`` steps per
iteration; SB3: ``n_steps``, 2,048 by default), so the env steps printed may pass the budget
by less than one batch. Seconds are the whole run (model, envs and, for rlflow, reporting and
the final checkpoint); both use one torch thread. The script prints every run, then per
library the median over seeds and the ratio rlflow/SB3 of the returns. A run is noisy (one
seed says little); the 1-minute load average is printed with each. Needs the ``mujoco`` and
``bench`` extras.

    python benchmarks/ppo_mujoco.py [--env Hopper-v5] [--steps 200000] [--seeds 0[,1,...]]
        [--only rlflow,sb3] [--tuned] [--set KEY=VALUE ...] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import torch

from rlflow.cli import main as rlflow_main

WINDOW = 20
"""Finished training episodes in the mean return, both libraries."""
LIBRARIES = ("rlflow", "sb3")
_ZOO_NET = {
    "log_std_init": -2,
    "ortho_init": False,
    "net_arch": {"pi": [256, 256], "vf": [256, 256]},
}
ZOO: dict[str, dict[str, Any]] = {
    "Hopper-v5": {
        "n_steps": 512,
        "batch_size": 32,
        "gamma": 0.999,
        "learning_rate": 9.80828e-05,
        "ent_coef": 0.00229519,
        "clip_range": 0.2,
        "n_epochs": 5,
        "gae_lambda": 0.99,
        "max_grad_norm": 0.7,
        "vf_coef": 0.835671,
        "policy_kwargs": _ZOO_NET,
    },
    "HalfCheetah-v5": {
        "n_steps": 512,
        "batch_size": 64,
        "gamma": 0.98,
        "learning_rate": 2.0633e-05,
        "ent_coef": 0.000401762,
        "clip_range": 0.1,
        "n_epochs": 20,
        "gae_lambda": 0.92,
        "max_grad_norm": 0.8,
        "vf_coef": 0.58096,
        "policy_kwargs": _ZOO_NET,
    },
    "Ant-v5": {},
}
"""rl-baselines3-zoo ``hyperparams/ppo.yml`` (2.9.0a2, commit 22e3ff2), its -v4 entries, each
with ``normalize: true`` and ``n_envs: 1``; ReLU activations (``nn.ReLU``) are added where the
zoo names them. Ant-v4 is SB3's defaults with normalization."""


class Run(NamedTuple):
    """One library's run for the budget."""

    library: str
    seed: int
    steps: int
    """Env steps sampled when the run stopped."""
    ret: float
    """Mean return of the last `WINDOW` finished training episodes."""
    episodes: int
    """Training episodes finished in the whole run."""
    seconds: float
    """Wall-clock seconds of the whole run."""
    load: float
    """1-minute load average at the start."""


def load1() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def run_rlflow(env_id: str, steps: int, seed: int, *, tuned: bool, settings: list[str]) -> Run:
    """``rlflow train ppo`` on ``env_id`` until ``steps`` env steps were sampled."""
    load = load1()
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) / "run"
        argv = ["train", "ppo", "--env", env_id, "--backend", "local", "--seed", str(seed)]
        argv += [] if tuned else ["--no-tuned"]
        argv += ["--stop-timesteps", str(steps), "--out", str(out_dir)]
        argv += ["--set", f"metrics_num_episodes_for_smoothing={WINDOW}"]
        for setting in settings:
            argv += ["--set", setting]
        stdout = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(stdout):
            code = rlflow_main(argv)
        seconds = time.perf_counter() - start
        if code != 0:
            raise SystemExit(f"rlflow {' '.join(argv)} exited with {code}:\n{stdout.getvalue()}")
        last = json.loads((out_dir / "progress.jsonl").read_text().splitlines()[-1])
    return Run(
        "rlflow",
        seed,
        int(last["num_env_steps_sampled"]),
        float(last["episode_return_mean"]),
        int(last["episodes_total"]),
        seconds,
        load,
    )


def sb3_model(env_id: str, seed: int, *, zoo: bool) -> Any:
    """SB3's PPO with its defaults, or with the zoo's entry for ``env_id`` (`ZOO`)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    if not zoo:
        return PPO("MlpPolicy", env_id, seed=seed, device="cpu", stats_window_size=WINDOW)
    kwargs = dict(ZOO[env_id])
    if "policy_kwargs" in kwargs:
        kwargs["policy_kwargs"] = {**kwargs["policy_kwargs"], "activation_fn": torch.nn.ReLU}
    env = VecNormalize(make_vec_env(env_id, n_envs=1, seed=seed))
    return PPO("MlpPolicy", env, seed=seed, device="cpu", stats_window_size=WINDOW, **kwargs)


def sb3_child(env_id: str, steps: int, seed: int, *, zoo: bool) -> None:
    """In the subprocess: SB3's PPO (`sb3_model`); print the run as one JSON line."""
    torch.set_num_threads(1)
    load = load1()
    start = time.perf_counter()
    model = sb3_model(env_id, seed, zoo=zoo)
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - start
    # Every finished episode's return, from the Monitor SB3 wraps the env in.
    returns = model.get_env().env_method("get_episode_rewards")[0]
    mean = statistics.fmean(returns[-WINDOW:])
    run = Run("sb3", seed, model.num_timesteps, mean, len(returns), seconds, load)
    print(json.dumps(run._asdict()))


def run_sb3(env_id: str, steps: int, seed: int, *, zoo: bool) -> Run | None:
    """SB3's run in a subprocess of this script; None without stable-baselines3."""
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        return None
    argv = [sys.executable, __file__, "--sb3-child", "--env", env_id]
    argv += ["--steps", str(steps), "--seeds", str(seed)] + (["--tuned"] if zoo else [])
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"SB3's run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return Run(**json.loads(done.stdout.strip().splitlines()[-1]))


def show(run: Run) -> None:
    """Print one run."""
    print(
        f"  {run.library:6} seed {run.seed}: return {run.ret:8.1f} (last {WINDOW} of "
        f"{run.episodes} episodes), {run.steps} env steps in {run.seconds:.0f} s "
        f"({run.steps / run.seconds:.0f} steps/s, load {run.load})",
        flush=True,
    )


def summary(runs: list[Run], env_id: str, steps: int, *, tuned: bool) -> None:
    """Medians over seeds per library and the ratio rlflow/SB3 of the returns."""
    what = "rlflow's tuned config and the zoo's" if tuned else "defaults"
    print(f"\nPPO ({what}), {env_id}, {steps} env steps, medians over seeds:")
    medians: dict[str, float] = {}
    for library in LIBRARIES:
        mine = [r for r in runs if r.library == library]
        if not mine:
            continue
        medians[library] = statistics.median(r.ret for r in mine)
        seconds = statistics.median(r.seconds for r in mine)
        print(f"  {library:6} return {medians[library]:8.1f}, {seconds:.0f} s ({len(mine)} seeds)")
    if len(medians) == 2:
        print(f"  rlflow/SB3 return: {medians['rlflow'] / medians['sb3']:.2f}")


def record(run: Run, args: argparse.Namespace) -> dict[str, Any]:
    """One JSON row for ``run``."""
    return {
        "benchmark": "ppo_mujoco",
        **run._asdict(),
        "env": args.env,
        "budget": args.steps,
        "tuned": args.tuned,
        "settings": args.set if run.library == "rlflow" else [],
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
    }


def main() -> None:
    """Parse arguments, run every (seed, library) pair, print the runs and the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Hopper-v5")
    parser.add_argument("--steps", type=int, default=200_000, help="env steps per run")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds")
    parser.add_argument("--only", default="rlflow,sb3", help="subset of rlflow,sb3")
    parser.add_argument(
        "--tuned", action="store_true", help="rlflow's tuned config, SB3 the zoo's entry"
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default=None, help="append one JSON line per run here")
    parser.add_argument("--sb3-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.sb3_child:
        sb3_child(args.env, args.steps, seeds[0], zoo=args.tuned)
        return
    torch.set_num_threads(1)
    print(f"torch threads 1, cpus {os.cpu_count()}, load average {os.getloadavg()}", flush=True)
    libraries = [lib for lib in LIBRARIES if lib in args.only.split(",")]
    runs: list[Run] = []
    # Seeds outer, libraries inner: a burst of load from elsewhere hits both alike.
    for seed in seeds:
        for library in libraries:
            if library == "rlflow":
                run: Run | None = run_rlflow(
                    args.env, args.steps, seed, tuned=args.tuned, settings=args.set
                )
            else:
                run = run_sb3(args.env, args.steps, seed, zoo=args.tuned)
            if run is None:
                print("  sb3    skipped: stable-baselines3 is not installed (extra bench)")
                continue
            runs.append(run)
            show(run)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(record(run, args)) + "\n")
    summary(runs, args.env, args.steps, tuned=args.tuned)


if __name__ == "__main__":
    main()

"""PPO on CartPole-v1: wall clock and env steps to a mean return of 475, rlflow vs SB3.

Three runs per seed, on the same machine, one after the other:

- ``sb3``: Stable-Baselines3 ``PPO("MlpPolicy")`` with rl-zoo's tuned CartPole-v1 entry
  (``hyperparams/ppo.yml``: n_envs 8, n_steps 32, batch_size 256, gae_lambda 0.8, gamma 0.98,
  n_epochs 20, ent_coef 0, learning_rate lin_0.001, clip_range lin_0.2, n_timesteps 1e5; SB3's
  own defaults for the rest: 64x64 tanh nets, vf_coef 0.5, max_grad_norm 0.5). ``lin_x`` decays
  linearly from x to 0 over the zoo's n_timesteps, so an SB3 run stops there (its step cap).
  One process, ``DummyVecEnv``, ``device="cpu"``.
- ``local``: rlflow PPO, the shipped ``tuned/CartPole-v1.yaml``, ``Trainer(backend="local")``:
  the two "remote" rollout workers run in this process, so it is single-process like SB3. The
  yaml's ``min_steps_per_iteration: 2000`` (a reporting setting) is set to 0 here so that the
  return is checked every 256 steps, as for SB3; learning is unchanged.
- ``ray``: the same config on a Ray session of 2 CPUs (2 rollout actors + the learner).
- ``ray-ahead``: ``ray`` with ``sample_ahead=True``: the workers sample the next batch while
  the learner trains on this one (weights one update round stale; the sync default is exact).

Torch uses 1 thread everywhere. "Return" is the same number in both libraries: the mean
undiscounted return of the last 100 finished training episodes (all envs, exploring policy):
rlflow's ``episode_return_mean`` (``metrics_num_episodes_for_smoothing=100``) and SB3's
``ep_info_buffer`` (Monitor episodes, ``stats_window_size=100``). Both are checked once per
train batch of 256 env steps, after the batch was trained on (rlflow: each ``train()``; SB3:
at the start of the next rollout). Seconds are training time only (rlflow: the trainer's
``time_total_s``; SB3: since ``learn()`` was called); building workers/envs and starting Ray are
reported apart as setup. A run that does not reach the target within its cap, or that fails
(e.g. Ray does not start on an overloaded machine), counts as infinite in the medians.

Timings are noisy on a small shared machine: the load average is printed before and after.

    python benchmarks/ppo_cartpole.py [--seeds 0,1,2] [--quick] [--max-steps 200000]
        [--only sb3,local,ray,ray-ahead] [--json PATH (each outcome as a JSON line)]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from rlflow import Trainer, flow
from rlflow.algorithms import tuned_config

ENV_ID = "CartPole-v1"
RUNNERS = ("sb3", "local", "ray", "ray-ahead")

ZOO_PPO_CARTPOLE: dict[str, Any] = {
    "n_envs": 8,
    "n_timesteps": 100_000,
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": ("lin", 0.001),
    "clip_range": ("lin", 0.2),
}
"""rl-baselines3-zoo ``hyperparams/ppo.yml``, entry ``CartPole-v1`` (marked "Tuned" there)."""


class Outcome(NamedTuple):
    """One run to the target."""

    runner: str
    seed: int
    reached: bool
    steps: int
    """Env steps sampled when the target was reached (or when the run stopped)."""
    seconds: float
    """Training seconds until then."""
    final_return: float
    """The mean return at that point."""
    setup_s: float
    """Seconds spent building the run before training (envs, workers, Ray)."""
    error: str = ""
    """Why the run failed, if it did."""


def _linear(initial: float) -> Callable[[float], float]:
    """rl-zoo's ``lin_<initial>``: SB3 passes ``progress_remaining`` from 1 down to 0."""

    def schedule(progress_remaining: float) -> float:
        return progress_remaining * initial

    return schedule


def run_sb3(seed: int, target: float) -> Outcome:
    """Train SB3 PPO with the zoo's CartPole-v1 settings until ``target`` or n_timesteps."""
    # Imported here so that the rlflow rows run without SB3 installed (extra ``bench``).
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class StopAtTarget(BaseCallback):
        """Checks the 100-episode mean once per rollout, after the previous one was trained."""

        def __init__(self) -> None:
            super().__init__()
            self.start = 0.0
            self.hit: tuple[int, float, float] | None = None
            self.last: tuple[int, float, float] = (0, 0.0, float("nan"))

        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def _on_rollout_start(self) -> None:
            self._check()

        def _on_training_end(self) -> None:
            self._check()

        def _check(self) -> None:
            infos = self.model.ep_info_buffer
            if self.hit is not None or not infos:
                return
            mean = sum(e["r"] for e in infos) / len(infos)
            self.last = (self.num_timesteps, time.perf_counter() - self.start, mean)
            if mean >= target:
                self.hit = self.last

        def _on_step(self) -> bool:
            return self.hit is None

    zoo = ZOO_PPO_CARTPOLE
    start = time.perf_counter()
    venv = make_vec_env(ENV_ID, n_envs=zoo["n_envs"], seed=seed)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=zoo["n_steps"],
        batch_size=zoo["batch_size"],
        gae_lambda=zoo["gae_lambda"],
        gamma=zoo["gamma"],
        n_epochs=zoo["n_epochs"],
        ent_coef=zoo["ent_coef"],
        learning_rate=_linear(zoo["learning_rate"][1]),
        clip_range=_linear(zoo["clip_range"][1]),
        seed=seed,
        device="cpu",
        verbose=0,
    )
    setup_s = time.perf_counter() - start
    callback = StopAtTarget()
    model.learn(total_timesteps=zoo["n_timesteps"], callback=callback)
    venv.close()
    steps, seconds, mean = callback.hit or callback.last
    return Outcome("sb3", seed, callback.hit is not None, steps, seconds, mean, setup_s)


def run_rlflow(runner: str, seed: int, target: float, max_steps: int) -> Outcome:
    """Train rlflow PPO (tuned CartPole config) as ``runner`` (``local``, ``ray`` or
    ``ray-ahead``) until ``target`` or the cap."""
    setup_start = time.perf_counter()
    backend, ahead = runner.removesuffix("-ahead"), runner.endswith("-ahead")
    config = tuned_config(
        "ppo", ENV_ID, seed=seed, min_steps_per_iteration=0, sample_ahead=ahead
    ).to_dict()
    try:
        if backend == "ray":
            flow.init(backend="ray", num_cpus=2, include_dashboard=False, log_to_driver=False)
        with Trainer("ppo", backend=backend, **config) as trainer:
            setup_s = time.perf_counter() - setup_start
            while True:
                result = trainer.train()
                mean = result["episode_return_mean"]
                steps = int(result["num_env_steps_sampled"])
                reached = mean is not None and mean >= target
                if reached or steps >= max_steps:
                    break
    finally:
        if flow.is_initialized():
            flow.shutdown()
        if backend == "ray":
            import ray  # here, so that an SB3-only process (peers.py) does not import Ray

            ray.shutdown()  # also after a failed start, so the next seed starts clean
    final = float("nan") if mean is None else float(mean)
    return Outcome(runner, seed, reached, steps, result["time_total_s"], final, setup_s)


def _median(outcomes: list[Outcome], field: str) -> float:
    """Median of ``field`` where a run that never reached the target counts as infinite."""
    values = [getattr(o, field) if o.reached else math.inf for o in outcomes]
    return statistics.median(values) if values else math.nan


def _fmt(value: float, spec: str) -> str:
    return "-" if math.isinf(value) or math.isnan(value) else format(value, spec)


def print_table(outcomes: list[Outcome], runners: list[str]) -> None:
    """Per-seed rows, then medians per runner and the wall-clock ratios rlflow/SB3."""
    print(
        f"\n{'runner':<10}{'seed':>5}{'reached':>9}{'env steps':>11}{'seconds':>9}"
        f"{'return':>8}{'setup s':>9}"
    )
    for o in outcomes:
        print(
            f"{o.runner:<10}{o.seed:>5}{'yes' if o.reached else 'NO':>9}{o.steps:>11}"
            f"{o.seconds:>9.1f}{o.final_return:>8.1f}{o.setup_s:>9.1f}  {o.error[:60]}"
        )
    print("\nmedians (a run that missed the target counts as infinite)")
    medians: dict[str, float] = {}
    for runner in runners:
        mine = [o for o in outcomes if o.runner == runner]
        medians[runner] = _median(mine, "seconds")
        print(
            f"{runner:<10} steps {_fmt(_median(mine, 'steps'), '>8.0f')}   "
            f"seconds {_fmt(medians[runner], '>6.1f')}   "
            f"reached {sum(o.reached for o in mine)}/{len(mine)}"
        )
    if "sb3" in medians:
        for runner in RUNNERS[1:]:
            if runner in medians:
                ratio = medians[runner] / medians["sb3"]
                print(f"wall-clock ratio rlflow-{runner}/sb3 (medians): {_fmt(ratio, '.2f')}")


def main() -> None:
    """Parse arguments, run every (seed, runner) pair, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--quick", action="store_true", help="seed 0 only")
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument(
        "--max-steps", type=int, default=200_000, help="rlflow step cap (SB3: zoo n_timesteps)"
    )
    parser.add_argument("--only", default=",".join(RUNNERS), help="subset of " + ",".join(RUNNERS))
    parser.add_argument("--json", default=None, help="append each outcome to this file")
    args = parser.parse_args()
    seeds = [0] if args.quick else [int(s) for s in args.seeds.split(",")]
    runners = [r for r in RUNNERS if r in args.only.split(",")]
    torch.set_num_threads(1)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, cpus {os.cpu_count()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if "sb3" in runners:
        import stable_baselines3

        print(f"stable-baselines3 {stable_baselines3.__version__}, zoo: {ZOO_PPO_CARTPOLE}")
    used = tuned_config("ppo", ENV_ID, min_steps_per_iteration=0).to_dict()
    print(f"rlflow tuned config as run (seed varies): {used}")
    outcomes: list[Outcome] = []
    # Seeds outer, libraries inner: a burst of load from elsewhere hits all libraries alike.
    for seed in seeds:
        for runner in runners:
            try:
                if runner == "sb3":
                    outcome = run_sb3(seed, args.target)
                else:
                    outcome = run_rlflow(runner, seed, args.target, args.max_steps)
            except Exception as err:
                outcome = Outcome(runner, seed, False, 0, math.nan, math.nan, math.nan, repr(err))
            outcomes.append(outcome)
            print(f"  {outcome}", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(outcome._asdict()) + "\n")
    print_table(outcomes, runners)
    print(f"load average at the end {os.getloadavg()[0]:.2f} (2 cores shared with other runs)")


if __name__ == "__main__":
    main()

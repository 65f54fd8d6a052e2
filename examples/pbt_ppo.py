"""Population-based training of PPO on CartPole-v1 with Ray Tune (``pip install "rl-flow[tune]"``).

Four trials start with learning rates 1e-5, 1e-4, 1e-3 and 1e-2 (the tuned PPO CartPole config
under them, sampling on each trial's learner: ``num_workers`` 0, so the four run side by side,
one logical CPU each). Every ``--interval`` iterations Tune's ``PopulationBasedTraining``
(`rlflow.tune.pbt_scheduler`) ranks them by ``episode_return_mean``: a trial in the bottom
quarter copies the checkpoint of one in the top quarter (exploit: weights, optimizer moments,
counters) and perturbs that trial's ``lr``, ``entropy_coeff`` and ``clip_param`` (explore: x0.8
or x1.2, or a new value drawn at random). The run stops once a trial's 100-episode mean return
reaches ``--target`` (or every trial ran ``--max-iters`` iterations). It prints which trial
copied which and the perturbed values (from PBT's ``pbt_global.txt``), then each trial's last
return and its config then; the experiment directory (``--storage``) keeps each trial's
progress.

    python examples/pbt_ppo.py                 # to 475
    python examples/pbt_ppo.py --target 150 --max-iters 12 --interval 2   # a quick look
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import ray
from ray import tune

from rlflow.tune import pbt_scheduler, trainable

LEARNING_RATES = [1e-5, 1e-4, 1e-3, 1e-2]
MUTATED = ("lr", "entropy_coeff", "clip_param")


class StopAllAt(tune.Stopper):  # type: ignore[misc]
    """Stop every trial once one reports ``episode_return_mean`` >= ``target``, or a trial
    after ``max_iters`` iterations."""

    def __init__(self, target: float, max_iters: int) -> None:
        self.target, self.max_iters, self.reached = target, max_iters, False

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        if (result.get("episode_return_mean") or float("-inf")) >= self.target:
            self.reached = True
        return self.reached or result["training_iteration"] >= self.max_iters

    def stop_all(self) -> bool:
        return self.reached


def exploits(experiment: Path) -> list[dict[str, Any]]:
    """PBT's log of exploit-and-explore steps (``pbt_global.txt``), one dict per step."""
    path = experiment / "pbt_global.txt"
    steps = []
    for line in path.read_text().splitlines() if path.exists() else []:
        target, clone, target_iter, clone_iter, clone_config, new_config = json.loads(line)
        steps.append(
            {
                "trial": target,
                "copied": clone,
                "at_iteration": target_iter,
                "copied_iteration": clone_iter,
                "from": {k: clone_config[k] for k in MUTATED},
                "to": {k: new_config[k] for k in MUTATED},
            }
        )
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=475.0, help="stop at this mean return")
    parser.add_argument("--max-iters", type=int, default=60, help="iterations per trial, at most")
    parser.add_argument("--interval", type=int, default=4, help="iterations between perturbations")
    parser.add_argument("--storage", default=None, help="Tune's storage dir (default: a temp dir)")
    args = parser.parse_args()
    # Four trials of one logical CPU each, side by side (PBT compares them as they run).
    ray.init(num_cpus=len(LEARNING_RATES), include_dashboard=False, log_to_driver=False)
    storage = args.storage or tempfile.mkdtemp(prefix="pbt_ppo_")
    scheduler = pbt_scheduler(
        "ppo",
        time_attr="training_iteration",
        perturbation_interval=args.interval,
        hyperparam_mutations={
            "lr": tune.loguniform(1e-5, 1e-2),
            "entropy_coeff": [0.0, 0.001, 0.01],
            "clip_param": [0.1, 0.2, 0.3],
        },
    )
    stopper = StopAllAt(args.target, args.max_iters)
    tuner = tune.Tuner(
        trainable("ppo"),
        param_space={
            "env": "CartPole-v1",
            "num_workers": 0,
            "seed": 0,
            "lr": tune.grid_search(LEARNING_RATES),
            "entropy_coeff": 0.0,
            "clip_param": 0.2,
        },
        tune_config=tune.TuneConfig(
            scheduler=scheduler, metric="episode_return_mean", mode="max", reuse_actors=False
        ),
        run_config=tune.RunConfig(
            name="pbt_ppo",
            stop=stopper,
            storage_path=storage,
            checkpoint_config=tune.CheckpointConfig(num_to_keep=4),
            verbose=0,
        ),
    )
    grid = tuner.fit()
    experiment = Path(storage) / "pbt_ppo"
    print(f"experiment directory: {experiment}")
    for step in exploits(experiment):
        changes = ", ".join(f"{k} {step['from'][k]:.3g} -> {step['to'][k]:.3g}" for k in MUTATED)
        print(
            f"exploit: trial {step['trial']} (iteration {step['at_iteration']}) copied trial "
            f"{step['copied']} (iteration {step['copied_iteration']}); explore: {changes}"
        )
    best = None
    for result in grid:
        m, c = result.metrics, result.config
        ret = m.get("episode_return_mean") or float("-inf")
        print(
            f"trial {result.path.rsplit('/', 1)[-1][:40]}: return {ret:.1f} at iteration "
            f"{m['training_iteration']} ({m['num_env_steps_sampled']} env steps); its config "
            f"then: lr {c['lr']:.3g}, entropy_coeff {c['entropy_coeff']:.3g}, clip_param "
            f"{c['clip_param']:.3g}"
        )
        best = ret if best is None else max(best, ret)
    print(f"best trial's return: {best:.1f} (target {args.target:g})")
    ray.shutdown()


if __name__ == "__main__":
    main()

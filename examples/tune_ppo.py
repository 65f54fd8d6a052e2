"""Sweep PPO's learning rate on CartPole-v1 with Ray Tune (needs ``pip install "rl-flow[tune]"``).

Two trials (``lr`` in {1e-3, 3e-4}), each a learner and one rollout worker: on a 2-core machine
they run one after the other. Each trial's config is the tuned PPO CartPole config with the
trial's fields on top (its ``lr_schedule`` dropped: the trial sets ``lr``); it stops after
``--iters`` iterations and keeps its last checkpoint.

    python examples/tune_ppo.py --iters 5
"""

from __future__ import annotations

import argparse
import tempfile

import ray
from ray import tune

from rlflow.tune import trainable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=5, help="iterations per trial")
    parser.add_argument("--storage", default=None, help="Tune's storage dir (default: a temp dir)")
    args = parser.parse_args()
    ray.init(include_dashboard=False, log_to_driver=False)
    tuner = tune.Tuner(
        trainable("ppo"),
        param_space={
            "env": "CartPole-v1",
            "num_workers": 1,
            "seed": 0,
            "lr": tune.grid_search([1e-3, 3e-4]),
        },
        run_config=tune.RunConfig(
            stop={"training_iteration": args.iters},
            storage_path=args.storage or tempfile.mkdtemp(prefix="tune_ppo_"),
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
            verbose=1,
        ),
    )
    grid = tuner.fit()
    for result in sorted(grid, key=lambda r: r.config["lr"]):
        m = result.metrics
        print(
            f"lr={result.config['lr']:g}: return {m['episode_return_mean']:.1f} after "
            f"{m['training_iteration']} iterations, {m['num_env_steps_sampled']} env steps, "
            f"checkpoint {result.checkpoint.path if result.checkpoint else None}"
        )
    ray.shutdown()


if __name__ == "__main__":
    main()

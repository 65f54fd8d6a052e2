"""MAML on 2-D point navigation: returns before and after adaptation, meta vs pretrained.

Meta-trains with the shipped ``tuned/rlflow-PointNav2D-v0.yaml`` (or ``--horizon 20`` for the
short episodes of the learning test) for ``--steps`` env steps, then trains a baseline without
meta-learning for the same env steps: the same plan with ``inner_adaptation_steps=0``, i.e.
multi-task PPO on random tasks. Both are then adapted on the same ``--tasks`` held-out tasks with
the same inner steps, and the mean episode returns after 0 .. K inner steps are printed; the
baseline is adapted with several inner learning rates, so that it is not handicapped by MAML's.
Seconds are wall clock on a small shared machine: read them as rough.

    python benchmarks/maml_adaptation.py [--backend local|ray] [--steps 160000]
        [--horizon 100] [--workers 10] [--tasks 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from rlflow import flow
from rlflow.algorithms import tuned_config
from rlflow.algorithms.maml import MAMLConfig, TaskSampler, adaptation_returns, maml_plan
from rlflow.algorithms.maml.policy import MAMLPolicy
from rlflow.envs import POINT_NAV_ID
from rlflow.workers import WorkerSet


def train(config: MAMLConfig, steps: int) -> tuple[dict[str, Any], float, int]:
    """Run the plan for ``steps`` env steps; the learner's weights, seconds, meta-updates."""
    workers = WorkerSet(config, MAMLPolicy)
    start, updates = time.perf_counter(), 0
    try:
        for result in maml_plan(workers, config):
            updates += 1
            if result["num_env_steps_sampled"] >= steps:
                break
        return workers.local_worker().get_weights(), time.perf_counter() - start, updates
    finally:
        workers.stop()


def show(label: str, returns: list[float]) -> None:
    """One line: the returns after 0..K inner steps."""
    cells = "  ".join(f"step {k}: {r:8.2f}" for k, r in enumerate(returns))
    print(f"{label:<34} {cells}", flush=True)


def main() -> None:
    """Parse the flags, train both policies, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="local", choices=["local", "ray"])
    parser.add_argument("--steps", type=int, default=160_000)
    parser.add_argument("--horizon", type=int, default=100)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    flow.init(args.backend)
    config = tuned_config(
        "maml",
        POINT_NAV_ID,
        num_workers=args.workers,
        seed=args.seed,
        env_config={"horizon": args.horizon},
        rollout_fragment_length=args.horizon,
    )
    assert isinstance(config, MAMLConfig)
    tasks = TaskSampler(config.replace(seed=12345)).sample(args.tasks)
    print(
        f"point navigation, horizon {args.horizon}, {args.workers} tasks per meta-batch, "
        f"{args.steps} env steps each, {args.tasks} held-out tasks, backend {args.backend}"
    )
    meta, seconds, updates = train(config, args.steps)
    print(f"meta-training: {updates} meta-updates in {seconds:.1f} s")
    pretrained, seconds, updates = train(config.replace(inner_adaptation_steps=0), args.steps)
    print(f"multi-task pretraining: {updates} updates in {seconds:.1f} s")
    show(f"meta-trained, inner_lr {config.inner_lr}", adaptation_returns(config, meta, tasks))
    for lr in sorted({config.inner_lr, 0.1, 1.0}):
        returns = adaptation_returns(config.replace(inner_lr=lr), pretrained, tasks)
        show(f"pretrained, inner_lr {lr}", returns)


if __name__ == "__main__":
    main()

"""ARS (V2-t) on MuJoCo: env steps and seconds to the ARS paper's thresholds.

Mania et al. 2018, Table 1: Swimmer 325, HalfCheetah 3,000 (their v1 envs; Gymnasium's v5
here). Runs ``ars`` with its tuned config (``ars/tuned/<env>.yaml``) on the local backend
(deterministic; Ray gives the same run) until the mean return of the last
``metrics_num_episodes_for_smoothing`` (``--smoothing``) unperturbed episodes reaches the
threshold, or ``--budget`` env steps (every episode's steps, perturbed or not) were played.

    python benchmarks/ars_mujoco.py [--env Swimmer-v5] [--target 325] [--budget 1000000]
        [--seeds 0] [--smoothing 20] [--backend local]
"""

from __future__ import annotations

import argparse
import os

from rlflow import flow
from rlflow.testing.learning import train_to_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="Swimmer-v5")
    parser.add_argument("--target", type=float, default=325.0)
    parser.add_argument("--budget", type=int, default=1_000_000)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--smoothing", type=int, default=20)
    parser.add_argument("--backend", default="local", choices=["local", "ray"])
    args = parser.parse_args()
    if args.backend == "ray":
        flow.init("ray", include_dashboard=False)
    else:
        flow.init("local")
    try:
        for seed in (int(s) for s in args.seeds.split(",")):
            outcome = train_to_target(
                "ars",
                args.target,
                args.budget,
                env=args.env,
                seed=seed,
                steps_per_iteration=0,
                overrides={"metrics_num_episodes_for_smoothing": args.smoothing},
            )
            reached = "reached" if outcome.best >= args.target else "missed"
            print(
                f"ARS {args.env} seed {seed}: best {outcome.best:.1f} ({reached} "
                f"{args.target:g}), {outcome.steps} env steps, {outcome.seconds:.0f} s, "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        flow.shutdown()


if __name__ == "__main__":
    main()

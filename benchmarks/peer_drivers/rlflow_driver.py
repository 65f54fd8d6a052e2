"""rlflow's APPO or IMPALA for `peers.py`: run in rlflow's venv as a subprocess.

    python rlflow_driver.py --algo appo --env CartPole-v1 --workers 2 --envs 8 --run-s 40

The shipped tuned config of ``--algo`` for ``--env`` (``tuned/gpu/`` for Atari with ``--gpu``;
CartPole's CPU config with ``num_gpus: 1`` otherwise; an Atari game without a CPU file gets the
algorithm's ``ALE/Breakout-v5`` file with ``env`` set) with ``--workers`` rollout workers of
``--envs`` envs each, an iteration every 2 s (``min_time_s_per_iteration``), and every env
wrapped in ``peer_count.StepCounter`` (``env_wrappers``), run on a Ray session of ``--workers``
CPUs (the learner thread runs in this process) by `impala_throughput.actor_learner_rates`. Prints
one JSON line ``{"report": {"sampled": N, "trained": M}}`` per result, rlflow's own counters.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # impala_throughput, peer_count


def print_result(result: dict[str, Any]) -> None:
    """Print rlflow's counters of one result as a JSON line."""
    counts = {
        "sampled": result["num_env_steps_sampled"],
        "trained": result["num_env_steps_trained"],
    }
    print(json.dumps({"report": counts}), flush=True)


def main() -> None:
    """Build the config, run the plan for ``--run-s`` seconds after its first result."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", choices=["appo", "impala"], default="appo")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--run-s", type=float, default=40.0)
    parser.add_argument("--gpu", action="store_true")
    args = parser.parse_args()
    from impala_throughput import actor_learner_rates
    from rlflow import flow
    from rlflow.algorithms import tuned_config
    from rlflow.errors import ConfigError

    atari_gpu = args.gpu and args.env.startswith("ALE/")
    overrides: dict[str, Any] = {
        "num_workers": args.workers,
        "num_envs_per_worker": args.envs,
        "min_steps_per_iteration": 0,
        "min_time_s_per_iteration": 2.0,
        "env_wrappers": ["peer_count.StepCounter"],
    }
    if args.gpu and not atari_gpu:
        overrides["num_gpus"] = 1
    hardware = "gpu" if atari_gpu else "cpu"
    try:
        config = tuned_config(args.algo, args.env, hardware=hardware, **overrides)
    except ConfigError:
        if not args.env.startswith("ALE/"):
            raise
        # APPO ships no CPU file for Pong: its Atari file (Breakout's, IMPALA Pong's sizes).
        other = "ALE/Breakout-v5"
        config = tuned_config(args.algo, other, hardware=hardware, env=args.env, **overrides)
        print(f"no tuned {args.algo} file for {args.env}: {other}'s, env set", flush=True)
    flow.init(backend="ray", num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    try:
        actor_learner_rates(args.algo, config, args.run_s, on_result=print_result)  # type: ignore[arg-type]
    finally:
        flow.shutdown()


if __name__ == "__main__":
    main()

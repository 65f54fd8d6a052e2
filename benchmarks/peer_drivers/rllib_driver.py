"""RLlib's APPO or IMPALA (new API stack) for `peers.py`: run in RLlib's venv as a subprocess.

    python rllib_driver.py --algo appo --env CartPole-v1 --workers 2 --envs 8 --run-s 40

Ray gets ``--workers`` + 1 CPUs (one per env runner and one for the algorithm's process, where
the learner runs: ``num_learners=0``); every env is wrapped in ``peer_count.StepCounter``.
After each ``train()`` it prints one JSON line ``{"report": {"sampled": N, "trained": M}}``
with RLlib's own lifetime counters, and stops ``--run-s`` seconds after the first result with
sampled steps. Atari ids get RLlib's own DeepMind preprocessing
(``wrap_atari_for_new_api_stack``, 4 stacked 84x84 frames, frame skip 4, no sticky actions).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # peer_count


def find(result: Any, key: str) -> float | None:
    """The first value of ``key`` anywhere in the nested ``result`` (depth first)."""
    if isinstance(result, dict):
        if key in result and isinstance(result[key], int | float):
            return float(result[key])
        for value in result.values():
            found = find(value, key)
            if found is not None:
                return found
    return None


def make_env(env_id: str) -> Any:
    """The env creator RLlib registers: ``env_id`` (Atari preprocessed) in a step counter."""
    import gymnasium as gym

    from peer_count import StepCounter

    def creator(cfg: Any) -> Any:
        if env_id.startswith("ALE/"):
            import ale_py
            from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

            gym.register_envs(ale_py)
            env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0)
            return StepCounter(wrap_atari_for_new_api_stack(env, framestack=4))
        return StepCounter(gym.make(env_id))

    return creator


def main() -> None:
    """Build the algorithm, train until the time is up, print a line per result."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", choices=["appo", "impala"], default="appo")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--run-s", type=float, default=40.0)
    parser.add_argument("--gpu", action="store_true")
    args = parser.parse_args()

    import ray
    from ray import tune
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.algorithms.impala import IMPALAConfig

    ray.init(num_cpus=args.workers + 1, num_gpus=1 if args.gpu else 0, include_dashboard=False)
    tune.register_env("peers_env", make_env(args.env))
    config = (APPOConfig() if args.algo == "appo" else IMPALAConfig()).environment("peers_env")
    config = config.env_runners(num_env_runners=args.workers, num_envs_per_env_runner=args.envs)
    config = config.learners(num_learners=0, num_gpus_per_learner=1 if args.gpu else 0)
    config = config.reporting(min_time_s_per_iteration=2)
    algo = config.build_algo()
    start = None
    try:
        while start is None or time.time() - start < args.run_s:
            result = algo.train()
            sampled = find(result, "num_env_steps_sampled_lifetime")
            trained = find(result, "num_env_steps_trained_lifetime")
            if start is None and sampled:
                start = time.time()
            print(json.dumps({"report": {"sampled": sampled, "trained": trained}}), flush=True)
    finally:
        algo.stop()
        ray.shutdown()


if __name__ == "__main__":
    main()

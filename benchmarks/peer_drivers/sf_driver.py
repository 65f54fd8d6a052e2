"""Sample Factory 2's APPO for `peers.py`: run in Sample Factory's venv as a subprocess.

    python sf_driver.py --env CartPole-v1 --workers 2 --envs 8 --run-s 40 [-- SF ARGS]

Runs ``sample_factory.train.run_rl`` in this process with ``--num_workers``,
``--num_envs_per_worker``, ``--device`` (cpu, or gpu with ``--gpu``), ``--async_rl=True``, a
stop ``--run-s`` seconds after its first sampled steps, and otherwise Sample Factory's own
defaults for the env family: its ``sf_examples.train_gym_env`` for Gymnasium ids, its
``sf_examples.atari`` defaults and DeepMind wrappers for ``ALE/<Game>-v5`` (played as
``<Game>NoFrameskip-v4``: no sticky actions, frame skip 4 in its wrappers). Every env is
wrapped in ``peer_count.StepCounter``. Sample Factory logs a line every 5 s: "Total num frames" (the
learner's env steps, times the frame skip) and "Samples" (the inference workers' steps).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # peer_count


def atari_name(env_id: str) -> str:
    """Sample Factory's name of the ALE game ``env_id`` (``ALE/Pong-v5`` -> ``atari_pong``)."""
    return "atari_" + env_id.removeprefix("ALE/").split("-")[0].lower()


def make_env(full_env_name: str, cfg: Any = None, env_config: Any = None, render_mode=None) -> Any:
    """Sample Factory's env function: ``full_env_name`` in a step counter (module level, so
    that Sample Factory's spawned workers can unpickle it)."""
    import gymnasium as gym

    from peer_count import StepCounter

    if full_env_name.startswith("ALE/"):
        import ale_py  # noqa: F401  registers the NoFrameskip-v4 ids
        from sf_examples.atari.atari_utils import make_atari_env

        name = atari_name(full_env_name)
        return StepCounter(make_atari_env(name, cfg, env_config, render_mode))
    return StepCounter(gym.make(full_env_name, render_mode=render_mode))


def stop_after(seconds: float) -> None:
    """Make Sample Factory's runner stop ``seconds`` after its inference workers served their
    first steps (its own ``--train_for_seconds`` never fires in 2.1.1: ``total_train_seconds``
    stays 0)."""
    from sample_factory.algo.runners.runner import Runner

    should_end = Runner._should_end_training
    first: list[float] = []

    def patched(self: Any) -> bool:
        if not first and sum(self.samples_collected) > 0:
            first.append(time.time())
        return should_end(self) or bool(first and time.time() - first[0] > seconds)

    Runner._should_end_training = patched  # type: ignore[method-assign]


def main() -> None:
    """Parse, register the env, run Sample Factory."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--run-s", type=float, default=40.0)
    parser.add_argument("--gpu", action="store_true")
    args, extra = parser.parse_known_args()
    from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
    from sample_factory.envs.env_utils import register_env
    from sample_factory.train import run_rl

    register_env(args.env, make_env)
    train_dir = tempfile.mkdtemp(prefix="peers_sf_")
    argv = [
        f"--env={args.env}",
        f"--num_workers={args.workers}",
        f"--num_envs_per_worker={args.envs}",
        f"--device={'gpu' if args.gpu else 'cpu'}",
        "--async_rl=True",
        f"--train_dir={train_dir}",
        "--experiment=peers",
        "--restart_behavior=overwrite",
        "--save_every_sec=100000",
        "--save_best_every_sec=100000",
        *[a for a in extra if a != "--"],
    ]
    sf_parser, partial = parse_sf_args(argv=argv)
    if args.env.startswith("ALE/"):
        from sf_examples.atari.atari_params import atari_override_defaults

        atari_override_defaults(partial.env, sf_parser)
    cfg = parse_full_cfg(sf_parser, argv)
    stop_after(args.run_s)
    sys.exit(run_rl(cfg))


if __name__ == "__main__":
    main()

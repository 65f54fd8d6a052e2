"""Multi-agent sampling cost: agent steps/s of a rollout worker on ``multi_cartpole`` vs the
same number of single-agent CartPole-v1 envs.

Both workers hold a PPO policy and produce the same number of rows per step: N multi-agent
envs with A agents each (one policy shared by all agents, or one policy per agent) against
N * A single-agent envs. The ratio is the price of the per-agent bookkeeping of
`rlflow.workers.multi_agent_sampler.MultiAgentSampler` (rows kept per agent, dict actions,
per-trajectory postprocessing) over the single-agent vector loop. Run::

    python benchmarks/multi_agent_sampling.py [--envs 8] [--agents 2] [--seconds 5]

``--pools 1,5,20 [--rounds 3]`` measures self-play's cost instead: rows/s on PettingZoo's
tic-tac-toe (turn-based), medians of rounds that each measure every setting in turn, with one
policy shared by both seats against self-play with each pool size
(`rlflow.config.self_play`: each step's opponent moves spread over up to ``pool_size`` frozen
policies, one forward pass each), and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from rlflow.algorithms import PPOConfig
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.workers import RolloutWorker


def rows_per_s(config: PPOConfig, seconds: float) -> float:
    """Rows (agent steps) per second sampled by one in-process worker."""
    worker = RolloutWorker(config, PPOPolicy, worker_index=1)
    worker.sample()  # envs built, buffers allocated
    rows, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch: Any = worker.sample()
        rows += batch.agent_steps()
    elapsed = time.perf_counter() - start
    worker.stop()
    return rows / elapsed


def main() -> None:
    """Measure and print the three rates and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--pools", default="", help="self-play pool sizes, e.g. 1,5,20")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --pools measurements")
    args = parser.parse_args()
    if args.pools:
        pools = [int(p) for p in args.pools.split(",")]
        self_play_cost(pools, args.envs, args.seconds, args.rounds)
        return
    common = {"num_workers": 0, "rollout_fragment_length": 100, "model": {"hidden": (64, 64)}}
    single = rows_per_s(
        PPOConfig(env="CartPole-v1", num_envs_per_worker=args.envs * args.agents, **common),
        args.seconds,
    )
    ma_env = {"env": "multi_cartpole", "env_config": {"num_agents": args.agents, "respawn": True}}
    shared = rows_per_s(PPOConfig(**ma_env, num_envs_per_worker=args.envs, **common), args.seconds)
    per_agent = rows_per_s(
        PPOConfig(
            **ma_env,
            num_envs_per_worker=args.envs,
            policies={f"p{i}": {} for i in range(args.agents)},
            policy_mapping_fn=_by_index,
            **common,
        ),
        args.seconds,
    )
    print(f"{'what':<54} {'rows/s':>10} {'ratio':>6}")
    print(f"{f'CartPole-v1, {args.envs * args.agents} envs':<54} {single:>10,.0f} {1.0:>6.2f}")
    label = f"multi_cartpole, {args.envs} envs x {args.agents} agents"
    print(f"{label + ', 1 shared policy':<54} {shared:>10,.0f} {shared / single:>6.2f}")
    print(f"{label + ', 1 policy each':<54} {per_agent:>10,.0f} {per_agent / single:>6.2f}")


def self_play_cost(pools: list[int], envs: int, seconds: float, rounds: int) -> None:
    """Print tic-tac-toe rows/s, medians of ``rounds`` rounds that each measure every setting
    once in turn: one shared policy, then self-play with each pool size; ratios to the first."""
    from rlflow.config import PolicySpec

    common = {
        "env": "pettingzoo.classic.tictactoe_v3",
        "num_workers": 0,
        "num_envs_per_worker": envs,
        "rollout_fragment_length": 64,
    }
    configs = {
        f"tictactoe, {envs} envs, 1 policy for both seats": PPOConfig(
            **common, policies={"p": PolicySpec()}, policy_mapping_fn=_shared
        )
    }
    for pool in pools:
        configs[f"tictactoe, {envs} envs, self-play, pool of {pool}"] = PPOConfig(
            **common, self_play={"snapshot_every": 1, "pool_size": pool}
        )
    rates: dict[str, list[float]] = {label: [] for label in configs}
    for _ in range(rounds):
        for label, config in configs.items():
            rates[label].append(rows_per_s(config, seconds))
    medians = {label: statistics.median(r) for label, r in rates.items()}
    base = next(iter(medians.values()))
    print(f"{'what (median of ' + str(rounds) + ' rounds)':<54} {'rows/s':>10} {'ratio':>6}")
    for label, rate in medians.items():
        print(f"{label:<54} {rate:>10,.0f} {rate / base:>6.2f}")


def _shared(agent_id: str) -> str:
    return "p"


def _by_index(agent_id: str) -> str:
    return "p" + agent_id.rsplit("_", 1)[1]


if __name__ == "__main__":
    main()

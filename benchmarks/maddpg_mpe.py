"""MADDPG / MATD3 on MPE against independent PPO, for as long as the machine allows.

MADDPG and MATD3 run their shipped tuned files (``mpe2.simple_spread_v3``,
``mpe2.simple_speaker_listener_v4``: the MADDPG paper's settings, the agents one team);
independent PPO learns on the same env without groups (spread: one policy shared by the three
agents; speaker-listener: a policy per agent, their observations differ), same seed. Prints one
JSON line per training iteration: env steps, seconds and the team's return (the sum of the
agents' rewards per episode, the mean of the last 100 episodes), so two runs compare at equal
env steps. Needs mpe2 (the multiagent extra).

Run (a wall-clock budget per run; quiet machines get further)::

    python benchmarks/maddpg_mpe.py maddpg spread 2850 [SEED] > maddpg_spread.jsonl
    python benchmarks/maddpg_mpe.py ppo listener 1400 [SEED] > ppo_listener.jsonl
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from rlflow.algorithms import tuned_config
from rlflow.trainer import Trainer

ENVS = {"spread": "mpe2.simple_spread_v3", "listener": "mpe2.simple_speaker_listener_v4"}


def role(agent_id: str) -> str:
    """speaker_0 -> speaker, listener_0 -> listener: a PPO policy per role."""
    return agent_id.split("_")[0]


def independent_ppo(env_name: str, seed: int) -> Trainer:
    """PPO without groups: each agent acts and learns on its own observation."""
    env_config: dict[str, Any] = {"max_cycles": 25, "continuous_actions": False}
    extra: dict[str, Any] = {}
    if env_name == "spread":
        env_config["N"] = 3
    else:  # the two agents' observation spaces differ: a policy each
        extra = {"policies": {"speaker": {}, "listener": {}}, "policy_mapping_fn": role}
    return Trainer(
        "ppo",
        env=ENVS[env_name],
        env_config=env_config,
        seed=seed,
        backend="local",
        num_workers=0,
        num_envs_per_worker=8,
        rollout_fragment_length=25,
        train_batch_size=2000,
        sgd_minibatch_size=500,
        num_sgd_iter=4,
        lr=5e-4,
        gamma=0.99,
        lambda_=0.95,
        model={"hidden": [64, 64], "activation": "tanh"},
        min_steps_per_iteration=2500,
        metrics_num_episodes_for_smoothing=100,
        **extra,
    )


def main(algo: str, env_name: str, seconds: float, seed: int) -> None:
    if algo in ("maddpg", "matd3"):
        config = tuned_config(algo, ENVS[env_name], seed=seed)
        trainer = Trainer(algo, config=config, backend="local")
    else:
        trainer = independent_ppo(env_name, seed)
    start = time.time()
    with trainer:
        while time.time() - start < seconds:
            result = trainer.train()
            row = {
                "algo": algo,
                "env": env_name,
                "seed": seed,
                "steps": result["num_env_steps_sampled"],
                "wall_s": round(time.time() - start, 1),
                "return": result["episode_return_mean"],
            }
            sys.stdout.write(json.dumps(row) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0)

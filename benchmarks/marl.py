"""Teams on MPE: the team algorithms against independent learners, one command (issue 46).

Each team algorithm (``maddpg``, ``matd3``, ``mappo``, ``qmix``, ``vdn``) runs its shipped tuned
file for ``mpe2.simple_spread_v3`` or ``mpe2.simple_speaker_listener_v4`` (the agents one team,
``groups``); the independent learners run the same env without groups: ``ppo`` (spread: one
policy shared by the three agents; speaker-listener: a policy per role, their observations
differ), ``ippo`` (PPO on MAPPO's tuned file for the env, as EPyMARL's IPPO shares its
settings with MAPPO: the same batch, epochs, rate, clip, entropy and network; without the
groups, the agent-id input and the value normalization, which PPO has not; spread's shared
policy gets three rows per env step, so its 9,600 rows make 3 minibatches of 3,200 per epoch
where MAPPO has one: PPO's minibatch is at most ``train_batch_size``) and ``dqn`` (the same
split as ``ppo``; EPyMARL's IQL settings in rlflow's units: Adam 5e-4, batches of 32, the target
copied every 5,000 steps, epsilon 1 -> 0.05 over 50,000 steps).

Every run is one seed on the local backend until its env-step or wall-clock budget; each
training iteration is one JSON line (``<out>/<learner>_<env>_s<seed>.jsonl``: env steps, seconds
and the team's return, the sum of the agents' rewards per episode, mean of the last 100
episodes). The end prints a table: each run's last and best return, and every learner's return
at the env steps the shortest run of that env reached, so learners compare at equal steps.

``--set KEY=VALUE`` (repeatable, YAML values as the command line's ``--set``) overrides a field
of the team algorithms' tuned files (``--set n_step=1``), not the independent learners'.

``--common-reward`` runs the independent learners on the team's reward, as EPyMARL's benchmark
does (its ``common_reward: True``, ``reward_scalarisation: "sum"``; rlflow's ``common_reward``
field, `rlflow.envs.common_reward`): every agent is paid the sum of all the agents' rewards of
the step, the reward the team algorithms learn from; their JSON files get a ``-common`` suffix
(``ppo-common_spread_s0.jsonl``). Without it each independent agent learns from its own reward.
The return reported is the team's either way (rlflow's ``episode_return_mean`` over the number
of agents when each was paid the whole sum).

``--local-ratio 0`` gives spread the shared reward of the original MPE (EPyMARL's Spread);
PettingZoo's default (0.5) mixes in each agent's own collision penalty. Needs mpe2 (the
``multiagent`` extra)::

    python benchmarks/marl.py --learners maddpg,mappo,qmix,ppo,dqn --envs spread,listener \\
        --steps 200000 [--seconds 3000] [--seeds 0] [--local-ratio 0.5] [--common-reward]
        [--set KEY=VALUE] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import yaml

from rlflow.algorithms import get_algorithm, tuned_config
from rlflow.config.files import parse_value, tuned_config_path
from rlflow.trainer import Trainer

ENVS = {"spread": "mpe2.simple_spread_v3", "listener": "mpe2.simple_speaker_listener_v4"}
TEAM = ("maddpg", "matd3", "mappo", "qmix", "vdn")
INDEPENDENT = ("ppo", "ippo", "dqn")
NUM_AGENTS = {"spread": 3, "listener": 2}
RESULTS = Path(__file__).resolve().parent / "results" / "marl"


def role(agent_id: str) -> str:
    """speaker_0 -> speaker, listener_0 -> listener: an independent policy per role."""
    return agent_id.split("_")[0]


def _env_config(env: str, local_ratio: float | None) -> dict[str, Any]:
    config: dict[str, Any] = {"max_cycles": 25, "continuous_actions": False}
    if env == "spread":
        config["N"] = 3
        if local_ratio is not None:
            config["local_ratio"] = local_ratio
    return config


def independent(
    learner: str, env: str, seed: int, local_ratio: float | None, common: bool = False
) -> Trainer:
    """``learner`` (ppo or dqn) on ``env`` without groups: each agent acts on its own
    observation and learns from its own reward, or with ``common`` from the sum of all the
    agents' rewards (``common_reward``)."""
    split: dict[str, Any] = {}
    if env == "listener":  # the two roles' observation spaces differ: a policy each
        split = {"policies": {"speaker": {}, "listener": {}}, "policy_mapping_fn": role}
    common: dict[str, Any] = {
        "env": ENVS[env],
        "env_config": _env_config(env, local_ratio),
        "seed": seed,
        "num_workers": 0,
        "min_steps_per_iteration": 2500,
        "metrics_num_episodes_for_smoothing": 100,
        "common_reward": common,
        **split,
    }
    if learner == "ippo":
        return Trainer("ppo", backend="local", **{**mappo_settings(env), **common})
    if learner == "ppo":
        return Trainer(
            "ppo",
            backend="local",
            **common,
            num_envs_per_worker=8,
            rollout_fragment_length=25,
            train_batch_size=2000,
            sgd_minibatch_size=500,
            num_sgd_iter=4,
            lr=5e-4,
            gamma=0.99,
            lambda_=0.95,
            model={"hidden": [64, 64], "activation": "tanh"},
        )
    return Trainer(
        "dqn",
        backend="local",
        **common,
        rollout_fragment_length=25,
        train_batch_size=32,
        buffer_size=125_000,
        learning_starts=800,
        target_network_update_freq=5000,
        initial_epsilon=1.0,
        final_epsilon=0.05,
        epsilon_timesteps=50_000,
        lr=5e-4,
        gamma=0.99,
        model={"hidden": [64, 64], "activation": "relu"},
    )


def mappo_settings(env: str) -> dict[str, Any]:
    """The fields of MAPPO's tuned file for ``env`` that PPO has (not the groups)."""
    path = tuned_config_path("mappo", ENVS[env])
    assert path is not None
    tuned = yaml.safe_load(path.read_text())
    ppo_fields = set(get_algorithm("ppo").config_cls.field_names())
    return {k: v for k, v in tuned.items() if k in ppo_fields and k not in ("groups", "env")}


def trainer_for(
    learner: str,
    env: str,
    seed: int,
    local_ratio: float | None,
    overrides: list[str] | None = None,
    common: bool = False,
) -> Trainer:
    """The run of ``learner`` on ``env``: a team algorithm's tuned file (with ``overrides``,
    ``KEY=VALUE`` texts), or an independent learner (``common``: on the common reward)."""
    if learner in INDEPENDENT:
        return independent(learner, env, seed, local_ratio, common)
    config_cls = get_algorithm(learner).config_cls
    fields = {}
    for item in overrides or []:
        key, _, text = item.partition("=")
        fields[key] = parse_value(config_cls, key, text)
    config = tuned_config(learner, ENVS[env], seed=seed, **fields)
    if local_ratio is not None and env == "spread":
        config = config.replace(env_config={**config.env_config, "local_ratio": local_ratio})
    return Trainer(learner, config=config, backend="local")


def run(
    learner: str, env: str, seed: int, steps: int, seconds: float, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Train until ``steps`` env steps or ``seconds``; one JSON line per iteration."""
    common = args.common_reward and learner in INDEPENDENT
    name = f"{learner}-common" if common else learner
    out = Path(args.out) / f"{name}_{env}_s{seed}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    start = time.time()
    # With the common reward each agent's return is the team's: the sum over agents counts it
    # once per agent.
    scale = NUM_AGENTS[env] if common else 1
    trainer = trainer_for(learner, env, seed, args.local_ratio, args.set, common)
    with trainer, out.open("w") as f:
        while True:
            result = trainer.train()
            row = {
                "learner": learner,
                "env": env,
                "seed": seed,
                "steps": result["num_env_steps_sampled"],
                "wall_s": round(time.time() - start, 1),
                "return": None
                if result["episode_return_mean"] is None
                else result["episode_return_mean"] / scale,
                "common_reward": common,
            }
            rows.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(json.dumps(row), flush=True)
            if row["steps"] >= steps or row["wall_s"] >= seconds:
                return rows


def at_steps(rows: list[dict[str, Any]], steps: int) -> float:
    """The return of the last iteration at or before ``steps`` env steps (NaN if none)."""
    before = [r["return"] for r in rows if r["steps"] <= steps and r["return"] is not None]
    return float(before[-1]) if before else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", default="maddpg,matd3,mappo,qmix,vdn,ppo,dqn")
    parser.add_argument("--envs", default="spread,listener")
    parser.add_argument("--steps", type=int, default=200_000, help="env steps per run")
    parser.add_argument("--seconds", type=float, default=math.inf, help="wall clock per run")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--local-ratio", type=float, default=None, help="spread's local_ratio")
    parser.add_argument(
        "--common-reward",
        action="store_true",
        help="independent learners learn from the sum of all agents' rewards (EPyMARL's)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field of the team algorithms' tuned files (repeatable)",
    )
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    learners = args.learners.split(",")
    unknown = sorted(set(learners) - set(TEAM) - set(INDEPENDENT))
    envs = args.envs.split(",")
    if unknown or set(envs) - set(ENVS):
        parser.error(f"learners are {TEAM + INDEPENDENT}, envs {tuple(ENVS)}")
    runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for env in envs:
        for seed in (int(s) for s in args.seeds.split(",")):
            for learner in learners:
                runs[learner, env, seed] = run(learner, env, seed, args.steps, args.seconds, args)
    print(f"\n{'env':<9} {'learner':<8} {'seed':>4} {'steps':>9} {'last':>8} {'best':>8} equal")
    for env in envs:
        shortest = min(rows[-1]["steps"] for (_, e, _), rows in runs.items() if e == env)
        for (learner, e, seed), rows in runs.items():
            if e != env:
                continue
            returns = [r["return"] for r in rows if r["return"] is not None]
            print(
                f"{env:<9} {learner:<8} {seed:>4} {rows[-1]['steps']:>9} "
                f"{returns[-1] if returns else math.nan:>8.1f} "
                f"{max(returns) if returns else math.nan:>8.1f} "
                f"{at_steps(rows, shortest):.1f} at {shortest}"
            )


if __name__ == "__main__":
    main()

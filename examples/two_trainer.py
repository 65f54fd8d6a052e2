"""Two trainers in one run: PPO for agent_0, DQN for agent_1 of a two-pole CartPole.

The composition of the RLlib Flow paper: one rollout stream is split with ``duplicate``; each
copy keeps one policy's experience (``SelectExperiences``) and feeds its own learner (DQN with
a replay buffer and target network, PPO with minibatch SGD); ``concurrently`` runs the two
sub-flows side by side. This script writes that plan here, from public operators only, and
hands it to the trainer (``Trainer(plan=...)``); `rlflow.algorithms.ppo_dqn.ppo_dqn_plan` is
the same dataflow as a registered algorithm (``rlflow train ppo_dqn --env multi_cartpole``).

    python examples/two_trainer.py [--backend local] [--stop-reward 150] [--weights 1 4]

``--weights 1 4`` trains the two policies in a fixed ratio (one PPO step, then four DQN
steps) instead of each as soon as its input is ready.
"""

from __future__ import annotations

import argparse
from typing import Any

from rlflow import Trainer
from rlflow.algorithms import tuned_config
from rlflow.algorithms.q_learning.replay import training_intensity_weights
from rlflow.data import ADVANTAGES
from rlflow.ops import (
    ConcatBatches,
    SelectExperiences,
    StandardizeFields,
    StoreToReplayBuffer,
    TrainOneStep,
    UpdateTargetNetwork,
    concurrently,
    parallel_rollouts,
    replay,
    standard_metrics_reporting,
)
from rlflow.replay import MultiAgentReplayBuffer, ReplayBuffer


def two_trainer_plan(workers: Any, config: Any) -> Any:
    """The composed plan (the paper's listing, with each learner's own settings)."""
    ppo, dqn = config.ppo, config.dqn
    buffer = MultiAgentReplayBuffer(lambda: ReplayBuffer(dqn.buffer_size, seed=dqn.seed))
    r1, r2 = parallel_rollouts(workers, mode="bulk_sync").duplicate(n=2)
    dqn_store = r1.for_each(SelectExperiences(["dqn_policy"])).for_each(
        StoreToReplayBuffer(local_buffer=buffer)
    )
    dqn_replay = (
        replay(local_buffer=buffer, num_items=dqn.train_batch_size)
        .for_each(TrainOneStep(workers, policies=["dqn_policy"]))
        .for_each(UpdateTargetNetwork(workers, 256, policies=["dqn_policy"]))
    )
    dqn_op = concurrently(
        [dqn_store, dqn_replay],
        mode="round_robin",
        output_indexes=[1],
        # [1, k]: k replays per stored round, for dqn.training_intensity (16 in the tuned file).
        round_robin_weights=training_intensity_weights(dqn),
    )
    ppo_op = (
        r2.for_each(SelectExperiences(["ppo_policy"]))
        .combine(ConcatBatches(ppo.train_batch_size))
        .for_each(StandardizeFields([ADVANTAGES]))
        .for_each(TrainOneStep(workers, policies=["ppo_policy"], num_sgd_iter=20))
    )
    weights = config.train_weights
    train_op = concurrently(
        [ppo_op, dqn_op],
        mode="async" if weights is None else "round_robin",
        round_robin_weights=weights,
    )
    return standard_metrics_reporting(train_op, workers, config)


def main() -> None:
    """Train until both policies reach ``--stop-reward`` (or ``--max-steps`` env steps)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["ray", "local"], default="ray")
    parser.add_argument("--stop-reward", type=float, default=150.0)
    parser.add_argument("--max-steps", type=int, default=300_000)
    parser.add_argument("--weights", type=float, nargs=2, metavar=("PPO", "DQN"))
    args = parser.parse_args()
    config = tuned_config("ppo_dqn", "multi_cartpole")
    if args.weights:
        config = config.replace(train_weights=list(args.weights))
    with Trainer("ppo_dqn", config=config, plan=two_trainer_plan, backend=args.backend) as trainer:
        while True:
            result = trainer.train()
            per_policy = result.get("policy_reward_mean") or {}
            shown = "  ".join(f"{pid} {value:6.1f}" for pid, value in per_policy.items())
            print(f"env steps {result['num_env_steps_sampled']:7d}  {shown}", flush=True)
            done = per_policy and min(per_policy.values()) >= args.stop_reward
            if done or result["num_env_steps_sampled"] >= args.max_steps:
                break


if __name__ == "__main__":
    main()

"""The DreamerV3 plan: workers sample, a replay of episodes, the learner dreams, weights go back.

Hafner et al., "Mastering Diverse Domains through World Models" (2023), as a dataflow::

    (1) parallel_rollouts(bulk_sync)     # every worker acts with the RSSM's posterior, step
                                         # by step (its state carried between steps), and
                                         # returns a fragment with next observations
    (2) -> StoreEpisodes                 # into the replay, episodes as streams of
                                         # observations (EpisodeReplay)
    (3) -> TrainWorldModelAndActor       # train_ratio: replayed steps per sampled step; each
                                         # train step draws batch_size windows of
                                         # batch_length steps and trains the world model,
                                         # then actor and critic on trajectories of
                                         # imagination_horizon steps imagined from every
                                         # replayed state (the real env is never stepped
                                         # there); weights go
                                         # to the workers after the round's steps
    (4) -> standard_metrics_reporting    # episodes, counters, the learner's stats

The nested computation (the imagination) runs inside the learner's step, batched over every
replayed state at once.
"""

from __future__ import annotations

from typing import Any

from rlflow import flow
from rlflow.algorithms.dreamerv3.config import DreamerV3Config
from rlflow.algorithms.dreamerv3.policy import DreamerV3Policy
from rlflow.algorithms.dreamerv3.replay import EpisodeReplay
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError
from rlflow.flow import LocalIterator
from rlflow.ops import (
    TrainResult,
    keys,
    parallel_rollouts,
    record_learner_info,
    standard_metrics_reporting,
)
from rlflow.replay import register_replay_buffer
from rlflow.workers import WorkerSet

__all__ = ["StoreEpisodes", "TrainWorldModelAndActor", "dreamerv3_plan", "make_replay"]


def dreamerv3_plan(workers: WorkerSet, config: DreamerV3Config) -> LocalIterator[dict[str, Any]]:
    """Build the DreamerV3 plan over ``workers``; each item is one iteration's result dict."""
    replay = make_replay(workers, config)
    register_replay_buffer(workers, "replay_buffer", replay)  # checkpoint_replay_buffers
    # (1) Fragments from every worker, acting through the world model's posterior.
    rollouts = parallel_rollouts(workers, mode="bulk_sync")
    # (2) Into the replay; (3) train steps at train_ratio, weights back to the workers.
    train_op = rollouts.for_each(StoreEpisodes(replay)).for_each(
        TrainWorldModelAndActor(workers, replay, config)
    )
    # (4) Results.
    return standard_metrics_reporting(train_op, workers, config)


def make_replay(workers: WorkerSet, config: DreamerV3Config) -> EpisodeReplay:
    """The replay for the learner's policy (its action encoding)."""
    policy = workers.local_worker().get_policy()
    if not isinstance(policy, DreamerV3Policy):
        raise ConfigError(f"dreamerv3_plan needs a DreamerV3Policy, got {type(policy).__name__}")
    codec = policy.model.codec
    return EpisodeReplay(config.replay_capacity, codec.encode, codec.dim, seed=config.seed)


class StoreEpisodes:
    """Add each sampled batch to the replay.

    Items: ``SampleBatch -> int`` (the env steps added). Use with ``.for_each`` after
    ``parallel_rollouts``. Side effects: the replay; counter ``num_env_steps_stored``.
    """

    def __init__(self, replay: EpisodeReplay) -> None:
        """Keep the replay."""
        self.replay = replay

    def __call__(self, batch: SampleBatch | MultiAgentBatch) -> int:
        if not isinstance(batch, SampleBatch):
            raise ConfigError("DreamerV3 is single-agent: StoreEpisodes got a MultiAgentBatch")
        steps = self.replay.add(batch)
        flow.current_metrics().counters[keys.NUM_ENV_STEPS_STORED] += steps
        return steps


class TrainWorldModelAndActor:
    """The round's train steps: ``sampled * train_ratio / (batch_size * batch_length)``
    (the fraction carried to the next round), none before the replay holds
    ``learning_starts`` entries.

    Items: ``int`` (env steps sampled) ``-> TrainResult``. Use with ``.for_each`` after
    :class:`StoreEpisodes`. Side effects: the learner's world model, actor, critic and slow
    critic (`DreamerV3Policy.learn`); after a round with steps, one ``put`` of the weights sent
    to every remote worker; counters ``num_env_steps_trained`` (replayed steps),
    ``num_train_steps``, ``num_weight_syncs``; ``info["learner"]`` (the round's last step).
    """

    def __init__(self, workers: WorkerSet, replay: EpisodeReplay, config: DreamerV3Config):
        """Keep the learner's policy, the replay and the settings."""
        self.workers, self.replay, self.config = workers, replay, config
        policy = workers.local_worker().get_policy()
        assert isinstance(policy, DreamerV3Policy)
        self.policy = policy
        self.credit = 0.0

    def __call__(self, sampled: int) -> TrainResult:
        config, ctx = self.config, flow.current_metrics()
        if len(self.replay) < config.learning_starts:
            return TrainResult(0, {})
        per_step = config.replayed_steps_per_train_step
        self.credit += sampled * config.train_ratio / per_step
        stats: dict[str, Any] = {}
        steps = 0
        with ctx.timers[keys.LEARN_TIMER].timing():
            while self.credit >= 1.0:
                self.credit -= 1.0
                batch = self.replay.sample(config.batch_size, config.batch_length)
                stats = self.policy.learn(batch)
                steps += 1
        if not steps:
            return TrainResult(0, {})
        ctx.counters[keys.NUM_ENV_STEPS_TRAINED] += steps * per_step
        ctx.counters[keys.NUM_AGENT_STEPS_TRAINED] += steps * per_step
        ctx.counters[keys.NUM_TRAIN_STEPS] += steps
        record_learner_info({self.policy.policy_id: stats})
        if self.workers.remote_workers():
            timestep = ctx.counters[keys.NUM_ENV_STEPS_SAMPLED]
            self.workers.sync_weights({"timestep": timestep})
            ctx.counters[keys.NUM_WEIGHT_SYNCS] += 1
        return TrainResult(steps * per_step, {self.policy.policy_id: stats})

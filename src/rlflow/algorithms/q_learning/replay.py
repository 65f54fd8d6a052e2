"""A replay-based algorithm's local buffer, replay shards, beta schedule and sampling/training
ratio, from its config (`ReplayAlgorithmConfig`: DQN's, Ape-X's, SAC's, TD3's and ppo_dqn's DQN
learner's)."""

from __future__ import annotations

import functools

from rlflow.algorithms.q_learning.config import ReplayAlgorithmConfig
from rlflow.replay.actors import ReplayShardSpec
from rlflow.replay.buffers import PrioritizedReplayBuffer, ReplayBuffer, SequenceReplayBuffer
from rlflow.replay.multi_agent import MultiAgentReplayBuffer
from rlflow.schedules import LinearSchedule

__all__ = [
    "beta_schedule",
    "make_replay_buffer",
    "replay_shard_spec",
    "training_intensity_weights",
]


def make_replay_buffer(
    config: ReplayAlgorithmConfig, *, multi_agent: bool = False
) -> ReplayBuffer | MultiAgentReplayBuffer:
    """A plan's local buffer: prioritized or uniform, ``buffer_size`` transitions (per policy,
    in a `MultiAgentReplayBuffer`, with ``multi_agent``); for a config with a
    ``replay_sequence_length`` (R2D2), a `SequenceReplayBuffer` of that many steps per item
    (uniform when ``prioritized_replay`` is off: alpha 0)."""
    if multi_agent:  # sequences (R2D2, QMIX's team) count their steps there too
        per_item = getattr(config, "replay_sequence_length", None) or 1
        return MultiAgentReplayBuffer(
            functools.partial(_single_buffer, config), steps_per_item=int(per_item)
        )
    return _single_buffer(config)


def _single_buffer(config: ReplayAlgorithmConfig) -> ReplayBuffer:
    sequence_length = getattr(config, "replay_sequence_length", None)
    if sequence_length is not None:  # R2D2: prioritized sequences
        return SequenceReplayBuffer(
            config.buffer_size,
            sequence_length=int(sequence_length),
            alpha=config.prioritized_replay_alpha if config.prioritized_replay else 0.0,
            beta=config.prioritized_replay_beta,
            seed=config.seed,
        )
    if config.prioritized_replay:
        return PrioritizedReplayBuffer(
            config.buffer_size,
            alpha=config.prioritized_replay_alpha,
            beta=config.prioritized_replay_beta,
            seed=config.seed,
        )
    return ReplayBuffer(config.buffer_size, seed=config.seed)


def replay_shard_spec(config: ReplayAlgorithmConfig, num_shards: int) -> ReplayShardSpec:
    """A distributed plan's replay shards (Ape-X's, ``num_shards`` from its
    ``num_replay_buffer_shards``): ``buffer_size`` and ``learning_starts`` over all shards,
    prioritized with ``prioritized_replay_alpha`` and ``prioritized_replay_beta`` as the
    config says, ``train_batch_size`` rows per replayed batch, shard i seeded ``seed + i``.
    With a ``replay_sequence_length`` (R2D2 on Ape-X's shards), shards of sequences of that
    many steps, each replayed batch ``train_batch_size // replay_sequence_length`` of them."""
    sequence_length = getattr(config, "replay_sequence_length", None)
    per_item = 1 if sequence_length is None else int(sequence_length)
    return ReplayShardSpec(
        num_shards=num_shards,
        capacity=config.buffer_size,
        prioritized=config.prioritized_replay,
        alpha=config.prioritized_replay_alpha,
        beta=config.prioritized_replay_beta,
        learning_starts=config.learning_starts,
        num_items=max(1, config.train_batch_size // per_item),
        seed=config.seed,
        sequence_length=sequence_length,
    )


def beta_schedule(config: ReplayAlgorithmConfig) -> LinearSchedule | None:
    """The importance-sampling exponent over env steps sampled; None without prioritization."""
    if not config.prioritized_replay:
        return None
    return LinearSchedule(
        initial=config.prioritized_replay_beta,
        final=config.final_prioritized_replay_beta,
        steps=config.prioritized_replay_beta_annealing_timesteps,
    )


def training_intensity_weights(
    config: ReplayAlgorithmConfig, steps_per_round: float | None = None
) -> list[float | str]:
    """Round-robin weights ``[1, k]`` of (store_op, replay_op) for ``training_intensity``.

    RLlib's rule. One store item is one sampling round of ``S = rollout_fragment_length *
    num_envs_per_worker * max(num_workers, 1)`` env steps; one replay item trains on
    ``train_batch_size`` (B) transitions. For ``training_intensity`` I replayed transitions per
    env step sampled, each round is followed by ``k = I * S / B`` train steps (``concurrently``
    draws a fractional turn at random, so the mean is exact). Without ``training_intensity``,
    ``k = 1``: the "native" intensity ``B / S``. ``steps_per_round`` replaces ``S`` (a plan
    reading recorded experience: the rows of one recorded batch).

    >>> from types import SimpleNamespace as Config
    >>> training_intensity_weights(Config(rollout_fragment_length=4, num_envs_per_worker=1,
    ...     num_workers=0, train_batch_size=32, training_intensity=16))
    [1, 2.0]
    """
    if config.training_intensity is None:
        return [1, 1]
    if steps_per_round is None:
        workers = max(config.num_workers, 1)
        steps_per_round = config.rollout_fragment_length * int(config.num_envs_per_worker) * workers
    return [1, config.training_intensity * steps_per_round / config.train_batch_size]

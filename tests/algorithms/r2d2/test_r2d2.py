"""R2D2 (issue 25): sequences folded for replay, the sequence loss against a step-by-step
reference, the buffer of sequences in DQN's dataflow, and the config's rules."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow.algorithms import get_algorithm
from rlflow.algorithms.r2d2 import R2D2Config
from rlflow.algorithms.r2d2.policy import R2D2Policy, h_function, h_inverse
from rlflow.data import SampleBatch
from rlflow.data.sample_batch import (
    ACTIONS,
    BOOTSTRAP,
    OBS,
    PREV_ACTIONS,
    PREV_REWARDS,
    REWARDS,
    SEQ_STEPS,
    SEQ_TERMINATED,
    TERMINATEDS,
)
from rlflow.errors import ConfigError
from rlflow.ops import replay
from rlflow.replay import SequenceReplayBuffer
from rlflow.replay.buffers import fold_sequences

ENV = "rlflow/StatelessCartPole-v1"


def _fragments() -> SampleBatch:
    """Two episode fragments as a worker writes them: 5 steps (ends truncated/fragment end)
    then 3 steps ending in termination, each closed by a bootstrap row."""
    rows = 5 + 1 + 3 + 1
    obs = np.arange(rows, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32)
    boot = np.zeros(rows, bool)
    boot[[5, 9]] = True
    terminated = np.zeros(rows, bool)
    terminated[8] = True
    return SampleBatch(
        {
            OBS: obs,
            ACTIONS: np.arange(rows) % 2,
            REWARDS: np.arange(rows, dtype=np.float32) + 1.0,
            TERMINATEDS: terminated,
            BOOTSTRAP: boot,
            PREV_ACTIONS: (np.arange(rows) + 1) % 2,
            PREV_REWARDS: np.arange(rows, dtype=np.float32),
            # an LSTM of 6 units: [h, c] stored with every step
            "state_in_0": np.arange(rows, dtype=np.float32)[:, None]
            * np.full((1, 6), 0.1, np.float32),
            "state_in_1": np.arange(rows, dtype=np.float32)[:, None]
            * np.full((1, 6), -0.1, np.float32),
        }
    )


def test_fragments_fold_into_sequences_with_their_next_observation_and_state() -> None:
    folded = fold_sequences(_fragments(), 3)
    # fragment 1 (rows 0-4, bootstrap 5): runs [0, 3) next 3, [3, 5) next 5; fragment 2 (rows
    # 6-8, bootstrap 9): [6, 9) next 9, terminated.
    np.testing.assert_array_equal(folded[SEQ_STEPS], [3, 2, 3])
    np.testing.assert_array_equal(folded[SEQ_TERMINATED], [False, False, True])
    np.testing.assert_array_equal(folded[OBS][:, :, 0], [[0, 1, 2, 3], [3, 4, 5, 0], [6, 7, 8, 9]])
    np.testing.assert_array_equal(folded[REWARDS], [[1, 2, 3, 4], [4, 5, 6, 0], [7, 8, 9, 10]])
    np.testing.assert_allclose(folded["state_in_0"][:, 0], [0.0, 0.3, 0.6], atol=1e-6)
    np.testing.assert_allclose(folded["state_in_1"][:, 0], [0.0, -0.3, -0.6], atol=1e-6)
    assert folded.env_steps() == 8 and folded.count == 3
    with pytest.raises(ConfigError, match="needs sequences closed by 'bootstrap' rows"):
        fold_sequences(SampleBatch({OBS: np.zeros((3, 2))}), 3)


def _policy(**fields: Any) -> R2D2Policy:
    config = R2D2Config(
        env=ENV,
        model={"use_lstm": True, "lstm_cell_size": 6, "hidden": [5]},
        **{"gamma": 0.9, "n_step": 2, "burn_in": 1, "replay_sequence_length": 4, **fields},
    )
    obs_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    return R2D2Policy(obs_space, gym.spaces.Discrete(2), config, seed=0)


def _reference_td(policy: R2D2Policy, folded: SampleBatch) -> list[list[float]]:
    """Each trained step's TD error, computed by stepping both networks one step at a time."""
    eps = policy.h_epsilon
    out = []
    for s in range(folded.count):
        n, width = int(folded[SEQ_STEPS][s]), folded[OBS].shape[1]
        q, q_target = [], []
        for model, store in ((policy.model, q), (policy.target_model, q_target)):
            state = [torch.from_numpy(folded[f"state_in_{k}"][s : s + 1]) for k in range(2)]
            for t in range(width):
                a, v, state = model(
                    torch.from_numpy(folded[OBS][s : s + 1, t : t + 1]),
                    state,
                    torch.from_numpy(folded[PREV_ACTIONS][s : s + 1, t : t + 1]),
                    torch.from_numpy(folded[PREV_REWARDS][s : s + 1, t : t + 1]),
                )
                store.append((v[0, 0] + a[0, 0] - a[0, 0].mean()).detach())
        row = []
        for t in range(policy.config.burn_in, n):
            m = min(policy.config.n_step, n - t)
            ret = sum(policy.config.gamma**k * float(folded[REWARDS][s, t + k]) for k in range(m))
            best = int(q[t + m].argmax())
            boot = float(h_inverse(q_target[t + m][best], eps))
            done = bool(folded[SEQ_TERMINATED][s]) and t + m == n
            target = float(
                h_function(torch.tensor(ret + policy.config.gamma**m * (not done) * boot), eps)
            )
            row.append(float(q[t][int(folded[ACTIONS][s, t])]) - target)
        out.append(row)
    return out


def test_the_sequence_loss_is_the_step_by_step_n_step_double_q_target() -> None:
    policy = _policy()
    with torch.no_grad():  # a target network that differs from the online one
        for p in policy.target_model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    folded = fold_sequences(_fragments(), 4)
    folded[OBS] = folded[OBS] / 10.0
    td, mask = policy._sequence_td(policy.update.batch_to_tensors(folded))
    expected = _reference_td(policy, folded)
    for s, row in enumerate(expected):
        got = td[s][mask[s]].detach().numpy()
        np.testing.assert_allclose(got, row, rtol=1e-5, atol=1e-5)
    stats = policy.update.learn_on_batch(folded)
    eta = policy.config.priority_eta
    # a sequence with no step after its burn-in has nothing to learn: priority 0 (+ eps later)
    priorities = [
        eta * max(map(abs, r)) + (1 - eta) * np.mean(np.abs(r)) if r else 0.0 for r in expected
    ]
    assert [len(r) for r in expected] == [3, 0, 2]
    np.testing.assert_allclose(stats["td_error"], priorities, rtol=1e-4)


def test_the_buffer_replays_sequences_counted_in_env_steps(local_backend: None) -> None:
    buffer = SequenceReplayBuffer(40, sequence_length=4, alpha=0.6, beta=0.4, seed=0)
    assert buffer.capacity == 10 and buffer.steps_per_item == 4
    buffer.add(_fragments())
    buffer.add(_fragments())
    assert len(buffer) == 6
    # num_items=8 env steps: two sequences of 4 per replayed batch
    batch = next(iter(replay(local_buffer=buffer, num_items=8, learning_starts=16).take(1)))
    assert batch.count == 2 and set(batch) >= {SEQ_STEPS, "batch_indexes", "weights"}
    buffer.update_priorities(batch["batch_indexes"], np.array([5.0, 5.0]))
    assert buffer.stats()["max_priority"] == 5.0


def test_r2d2_settings_are_checked_before_anything_starts() -> None:
    with pytest.raises(ConfigError, match=r"R2D2Config.burn_in=20 must be < replay_sequence_len"):
        R2D2Config(burn_in=20)
    with pytest.raises(ConfigError, match=r"R2D2Config.train_batch_size=10 must be >= replay_seq"):
        R2D2Config(train_batch_size=10)
    with pytest.raises(ConfigError, match="worker_side_prioritization"):
        R2D2Config(worker_side_prioritization=True)


def test_r2d2_acts_with_memory_and_trains_on_replayed_sequences(local_backend: None) -> None:
    from rlflow import Trainer

    with Trainer(
        "r2d2",
        env=ENV,
        num_workers=0,
        seed=0,
        model={"lstm_cell_size": 8, "hidden": [8]},
        learning_starts=100,
        min_steps_per_iteration=300,
        min_time_s_per_iteration=0.0,
    ) as trainer:
        result = trainer.train()
        policy = trainer.workers.local_worker().get_policy()
        assert policy.recurrent and isinstance(policy.model.cell, torch.nn.LSTM)
        # Trained steps count the replayed sequences' env steps, not their rows.
        assert result["num_env_steps_trained"] > result["num_env_steps_sampled"] > 0
        action, state = trainer.compute_single_action(np.zeros(2, np.float32), state=None)
        assert action in (0, 1) and [s.shape for s in state] == [(8,), (8,)]
    assert get_algorithm("r2d2").policy_cls is R2D2Policy


def test_replay_shards_of_sequences_fold_replay_and_take_priorities(local_backend: None) -> None:
    from rlflow import flow
    from rlflow.replay import ReplayShardSpec, create_replay_actors, split_shard_indexes

    # 2 shards keeping 16 env steps each (4 sequences of 4); replay starts at 5 env steps per
    # shard (2 sequences), batches of 3 sequences.
    spec = ReplayShardSpec(
        num_shards=2,
        capacity=32,
        learning_starts=10,
        num_items=3,
        seed=0,
        sequence_length=4,
        prioritized=True,
    )
    assert spec.shard_learning_starts == 2
    actors = create_replay_actors(spec)
    shard = actors[1]
    replays = flow.from_actors([shard]).gather_async()
    assert next(replays) is None  # empty
    flow.get(shard.add_batch.remote(_fragments()))  # 5 steps -> 4 + 1, 3 steps -> 3
    batch = next(b for b in replays if b is not None)
    assert batch.count == 3 and batch[OBS].shape == (3, 5, 2)
    assert set(batch[SEQ_STEPS].tolist()) <= {4, 1, 3}
    shards, slots = split_shard_indexes(batch["batch_indexes"])
    assert shards.tolist() == [1, 1, 1] and set(slots.tolist()) <= {0, 1, 2}
    flow.get(shard.update_priorities.remote(batch["batch_indexes"], np.full(3, 7.0)))
    assert flow.get(shard.stats.remote())["max_priority"] == 7.0
    with pytest.raises(ConfigError, match=r"capacity=6 must be >= num_shards \* sequence_length"):
        ReplayShardSpec(num_shards=2, capacity=6, sequence_length=4)


def test_apex_r2d2_shards_are_of_sequences_and_its_settings_are_both_algorithms() -> None:
    from rlflow.algorithms.apex_r2d2 import ApexR2D2Config
    from rlflow.algorithms.q_learning.replay import replay_shard_spec

    config = ApexR2D2Config(
        replay_sequence_length=10, train_batch_size=320, buffer_size=4000, learning_starts=1000
    )
    spec = replay_shard_spec(config, config.num_replay_buffer_shards)
    assert (spec.sequence_length, spec.num_items, spec.capacity) == (10, 32, 4000)
    assert get_algorithm("apex_r2d2").policy_cls is R2D2Policy
    with pytest.raises(ConfigError, match=r"ApexR2D2Config\.num_workers=0"):
        ApexR2D2Config(num_workers=0)
    with pytest.raises(ConfigError, match=r"ApexR2D2Config\.burn_in=20 must be < replay"):
        ApexR2D2Config(burn_in=20)


def test_apex_r2d2_trains_on_sequences_from_its_shards(local_backend: None) -> None:
    from rlflow import Trainer, flow
    from rlflow.replay import replay_buffers

    with Trainer(
        "apex_r2d2",
        env=ENV,
        num_workers=2,
        num_envs_per_worker=2,
        seed=0,
        model={"lstm_cell_size": 8, "hidden": [8]},
        replay_sequence_length=10,
        train_batch_size=80,
        learning_starts=100,
        buffer_size=2000,
        min_steps_per_iteration=400,
        min_time_s_per_iteration=0.0,
    ) as trainer:
        result = trainer.train()
        while result["num_env_steps_trained"] == 0:
            result = trainer.train()
        # The learner counts the replayed sequences' env steps (8 sequences of <= 10 steps
        # each batch), not their rows (8 a batch); the shards hold sequences and took the
        # learner's priorities.
        counters = result["counters"]
        trained, batches = counters["num_env_steps_trained"], counters["num_train_steps"]
        assert 8 * batches < trained <= 80 * batches
        assert counters["num_env_steps_replayed"] >= trained
        shards = replay_buffers(trainer.workers)["replay_shards"].shards
        stats = flow.get([shard.stats.remote() for shard in shards])
        # Sequences of <= 10 steps: fewer items than env steps stored, more than a tenth.
        items = sum(s["num_added"] for s in stats)
        assert counters["num_env_steps_stored"] / 10 <= items < counters["num_env_steps_stored"]
        assert max(s["max_priority"] for s in stats) != 1.0  # the learner's priorities came
        policy = trainer.workers.local_worker().get_policy()
        assert policy.recurrent

"""Policies with memory (issue 25): sequences, padding, state across fragments, minibatches by
sequence, the config's rules and acting with state."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlflow import Trainer
from rlflow.algorithms import get_algorithm
from rlflow.data import SampleBatch
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    EPS_ID,
    PREV_ACTIONS,
    PREV_REWARDS,
    SEQ_START,
    VF_PREDS,
)
from rlflow.data.sequences import SequenceLayout, minibatch_groups
from rlflow.errors import ConfigError
from rlflow.models.memory import state_in_key
from rlflow.models.recurrent import RecurrentActorCritic
from rlflow.workers import WorkerSet

ENV = "rlflow/StatelessCartPole-v1"


def _ppo(**fields: Any) -> Any:
    model = {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 7, "hidden": [8]}
    model.update(fields.pop("model", {}))
    base = {"env": ENV, "num_workers": 0, "seed": 3, "num_envs_per_worker": 3}
    return get_algorithm("ppo").config_cls(**{**base, "model": model, **fields})


def _step_alone(
    model: RecurrentActorCritic, tensors: dict[str, torch.Tensor], rows: range
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence's outputs, one step at a time from its first row's stored state."""
    states = sum(1 for key in tensors if key.startswith("state_in_"))
    state = [tensors[state_in_key(k)][rows.start][None] for k in range(states)]
    dists, values = [], []
    for r in rows:
        prev_a = tensors[PREV_ACTIONS][r].reshape(1, 1)
        prev_r = tensors[PREV_REWARDS][r].reshape(1, 1)
        dist, value, state = model(tensors["obs"][r].reshape(1, 1, -1), state, prev_a, prev_r)
        dists.append(dist[0, 0])
        values.append(value[0, 0])
    return torch.stack(dists), torch.stack(values)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_padded_sequences_give_each_sequence_stepped_alone(cell: str) -> None:
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    memory = {"use_lstm": cell == "lstm", "use_gru": cell == "gru", "lstm_cell_size": 6}
    config = _ppo(model={**memory, "hidden": [5], "lstm_use_prev_action": True,
                         "lstm_use_prev_reward": True})  # fmt: skip
    policy = get_algorithm("ppo").policy_cls(space, gym.spaces.Discrete(4), config, seed=0)
    model = policy.model
    lengths = [4, 1, 7, 2, 7]
    count = sum(lengths)
    gen = torch.Generator().manual_seed(0)
    starts = np.cumsum([0, *lengths[:-1]])
    seq_start = np.zeros(count, dtype=bool)
    seq_start[starts] = True
    states = len(model.initial_state(1))
    batch = SampleBatch(
        {
            "obs": torch.randn(count, 3, generator=gen).numpy(),
            SEQ_START: seq_start,
            PREV_ACTIONS: torch.randint(0, 4, (count,), generator=gen).numpy(),
            PREV_REWARDS: torch.randn(count, generator=gen).numpy(),
            **{
                state_in_key(k): torch.randn(count, 6, generator=gen).numpy() for k in range(states)
            },
        }
    )
    tensors = policy.update.batch_to_tensors(batch)  # the columns and the sequences' layout
    with torch.no_grad():
        dist, value = policy.model_outputs(tensors)
        alone = [_step_alone(model, tensors, range(a, a + n)) for a, n in zip(starts, lengths)]
    assert dist.shape == (count, 4) and value.shape == (count,)
    torch.testing.assert_close(dist, torch.cat([d for d, _ in alone]), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(value, torch.cat([v for _, v in alone]), rtol=1e-5, atol=1e-6)


def test_a_padded_minibatch_gives_the_loss_of_its_sequences_computed_one_by_one() -> None:
    config = _ppo(model={"lstm_use_prev_action": True, "lstm_use_prev_reward": True})
    workers = WorkerSet(config, get_algorithm("ppo").policy_cls)
    try:
        worker = workers.local_worker()
        batch = worker.sample()
        policy = worker.get_policy()
        tensors = policy.update.batch_to_tensors(batch)
        with torch.no_grad():
            padded, _ = policy.loss(tensors)
            starts = np.flatnonzero(batch[SEQ_START])
            bounds = zip(starts, [*starts[1:], batch.count], strict=True)
            alone = [_step_alone(policy.model, tensors, range(a, b)) for a, b in bounds]
            policy.model_outputs = lambda _: (  # type: ignore[method-assign]
                torch.cat([d for d, _ in alone]),
                torch.cat([v for _, v in alone]),
            )
            one_by_one, _ = policy.loss(tensors)
    finally:
        workers.stop()
    assert len(starts) > 3 and float(padded) == pytest.approx(float(one_by_one), rel=1e-5)


def test_state_across_fragments_is_the_cell_stepped_over_the_whole_episode() -> None:
    # One env, fragments of 9 steps: the episodes run across fragment boundaries; the columns
    # recorded while sampling are what the model gives stepped over each whole episode from the
    # initial state, and what learning's sequences (max_seq_len 7) give for each fragment.
    config = _ppo(num_envs_per_worker=1, rollout_fragment_length=9)
    workers = WorkerSet(config, get_algorithm("ppo").policy_cls)
    try:
        worker = workers.local_worker()
        policy = worker.get_policy()
        fragments = [worker.sample() for _ in range(6)]
        batch = SampleBatch.concat_samples(fragments)
        for fragment in fragments:
            tensors = policy.update.batch_to_tensors(fragment)
            with torch.no_grad():
                dist, value = policy.model_outputs(tensors)
            np.testing.assert_allclose(dist.numpy(), fragment[ACTION_DIST_INPUTS], atol=1e-6)
            np.testing.assert_allclose(value.numpy(), fragment[VF_PREDS], atol=1e-6)
        episodes = batch.split_by_episode()
        assert any(len(e) > 9 for e in episodes[:-1])  # an episode spans fragments
        for episode in episodes:
            state = [torch.from_numpy(s) for s in policy.initial_state(1)]
            obs = torch.from_numpy(episode["obs"])[None]
            with torch.no_grad():
                dist, _, _ = policy.model(obs, state)
            np.testing.assert_allclose(dist[0].numpy(), episode[ACTION_DIST_INPUTS], atol=1e-5)
    finally:
        workers.stop()
    # Sequences: each fragment's episode pieces start one, then every max_seq_len rows.
    for fragment in fragments:
        pieces = np.flatnonzero(np.diff(fragment[EPS_ID], prepend=-1))
        expected = np.zeros(fragment.count, bool)
        for a, b in zip(pieces, [*pieces[1:], fragment.count], strict=True):
            expected[a:b:7] = True
        np.testing.assert_array_equal(fragment[SEQ_START], expected)


def test_minibatches_hold_whole_sequences_each_row_at_most_once() -> None:
    seq_start = np.zeros(60, bool)
    seq_start[[0, 5, 7, 20, 21, 30, 44, 50]] = True
    layout = SequenceLayout.of({SEQ_START: seq_start})
    assert layout is not None and layout.steps.tolist() == [5, 2, 13, 1, 9, 14, 6, 10]
    rng = np.random.default_rng(0)
    order = rng.permutation(layout.num_sequences)
    groups = minibatch_groups(layout.steps, order, 16)
    assert len(groups) == 60 // 16  # the k-th ends with the sequence reaching 16 * k steps
    reached = np.cumsum([layout.steps[g].sum() for g in groups])
    assert all(16 * (k + 1) <= r < 16 * (k + 1) + 14 for k, r in enumerate(reached))
    rows = [layout.take(g)[0] for g in groups]
    taken = np.concatenate(rows)
    assert len(np.unique(taken)) == len(taken)  # no row twice; the rest waits for an epoch
    for group, group_rows in zip(groups, rows, strict=True):
        expected = np.concatenate([np.arange(a, a + n) for a, n in
                                   zip(layout.starts[group], layout.rows[group])])  # fmt: skip
        np.testing.assert_array_equal(group_rows, expected)  # whole sequences, in order
    with pytest.raises(ConfigError, match="must start with a sequence"):
        SequenceLayout.of({SEQ_START: seq_start[1:]})


def test_memory_keys_are_checked_before_anything_starts() -> None:
    ppo = get_algorithm("ppo").config_cls
    with pytest.raises(ConfigError, match="use_lstm and use_gru are both true"):
        ppo(model={"use_lstm": True, "use_gru": True})
    with pytest.raises(ConfigError, match=r"model.lstm_cell_size=0 must be an int >= 1"):
        ppo(model={"use_lstm": True, "lstm_cell_size": 0})
    with pytest.raises(ConfigError, match=r"model.max_seq_len='20' must be an int >= 1"):
        ppo(model={"use_lstm": True, "max_seq_len": "20"})
    with pytest.raises(ConfigError, match=r"model.use_lstm='yes' must be true or false"):
        ppo(model={"use_lstm": "yes"})
    with pytest.raises(ConfigError, match=r"wrap the built-in network, not model\.custom_model"):
        ppo(model={"use_lstm": True, "custom_model": _TinyGRU})
    dqn = get_algorithm("dqn")
    with pytest.raises(ConfigError, match="DQNPolicy does not train policies with memory"):
        WorkerSet(dqn.config_cls(env=ENV, model={"use_lstm": True}), dqn.policy_cls)


class _TinyGRU(nn.Module):
    """A recurrent custom model (rlflow.models.recurrent's interface)."""

    def __init__(self, obs_space: Any, action_space: Any, num_outputs: int, config: Any) -> None:
        super().__init__()
        self.gru = nn.GRU(int(np.prod(obs_space.shape)), 8, batch_first=True)
        self.head = nn.Linear(8, num_outputs + 1)

    def initial_state(self, batch_size: int) -> list[torch.Tensor]:
        return [torch.zeros(batch_size, 8)]

    def forward(self, obs: Any, state: Any, prev_actions: Any = None, prev_rewards: Any = None):  # type: ignore[no-untyped-def]
        out, h = self.gru(obs.float(), state[0][None].contiguous())
        head = self.head(out)
        return head[..., :-1], head[..., -1], [h[0]]


def test_a_recurrent_custom_model_trains_and_acts_with_state() -> None:
    with Trainer(
        "ppo",
        backend="local",
        env=ENV,
        num_workers=0,
        seed=1,
        model={"custom_model": _TinyGRU, "max_seq_len": 5},
        train_batch_size=64,
        rollout_fragment_length=64,
        sgd_minibatch_size=32,
        num_sgd_iter=2,
        min_time_s_per_iteration=0.0,
    ) as trainer:
        result = trainer.train()
        policy = trainer.workers.local_worker().get_policy()
        assert policy.recurrent and result["info"]["learner"]["default_policy"]["num_steps"] == 4
        # Acting with state: the trainer's actions and states are the model's, step by step.
        state = trainer.get_initial_state()
        assert [s.shape for s in state] == [(8,)]
        obs = np.array([0.01, -0.02], np.float32)
        expected_state = [torch.zeros(1, 8)]
        for _ in range(3):
            action, state = trainer.compute_single_action(obs, state=state)
            with torch.no_grad():
                logits, _, expected_state = policy.model(
                    torch.from_numpy(obs)[None, None], expected_state
                )
            assert action == int(logits[0, 0].argmax())
            np.testing.assert_allclose(state[0], expected_state[0][0].numpy(), atol=1e-6)
        with pytest.raises(ConfigError, match="has no memory"):
            Trainer("ppo", backend="local", env=ENV).compute_single_action(obs, state=state)


def test_learners_with_memory_update_as_one_learner(local_backend: None) -> None:
    config = _ppo(rollout_fragment_length=40)
    spec = get_algorithm("ppo")
    sampler = WorkerSet(config, spec.policy_cls)
    batch = sampler.local_worker().sample()
    sampler.stop()
    weights = []
    for learners in (0, 2):
        workers = WorkerSet(config.replace(num_learners=learners), spec.policy_cls)
        try:
            workers.learner().learn_on_batch(batch, num_sgd_iter=2, sgd_minibatch_size=40)
            weights.append(workers.local_worker().get_policy().get_weights())
        finally:
            workers.stop()
    for name in weights[0]:
        np.testing.assert_allclose(weights[1][name], weights[0][name], rtol=1e-5, atol=2e-6)


def test_a_checkpoint_keeps_each_env_s_memory_and_continues_identically(tmp_path: Any) -> None:
    fields = {
        "backend": "local",
        "env": ENV,
        "num_workers": 1,
        "seed": 2,
        "num_envs_per_worker": 2,
        "model": {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 6, "hidden": [8]},
        "train_batch_size": 60,
        "rollout_fragment_length": 30,
        "sgd_minibatch_size": 30,
        "num_sgd_iter": 2,
        "min_time_s_per_iteration": 0.0,
    }
    with Trainer("ppo", **fields) as trainer:
        trainer.train()
        checkpoint = trainer.save(tmp_path / "ckpt")
        expected = [trainer.train(), trainer.train()]
    with Trainer.restore(checkpoint, backend="local") as restored:
        got = [restored.train(), restored.train()]
    for a, b in zip(expected, got, strict=True):
        assert b["info"]["learner"] == a["info"]["learner"]  # the same batches, to the bit
        assert b["episode_return_mean"] == a["episode_return_mean"]


@pytest.mark.parametrize("algo", ["ppo", "impala"])
def test_multi_agent_sampling_carries_each_agents_state(local_backend: None, algo: str) -> None:
    # Two LSTM policies over three agents of MultiAgentCartPole (agents leave when their pole
    # falls, at different steps); fragments of 7 steps. For each policy's rows: every piece of
    # an agent's trajectory is sequences from its stored state that reproduce what the agent
    # acted with, and stepping the cell over an agent's whole life from the initial state gives
    # the same outputs (its state crossed the fragment boundaries). IMPALA's rows come as
    # sequences closed by a bootstrap row.
    from rlflow.config import PolicySpec
    from rlflow.data.sample_batch import AGENT_INDEX, BOOTSTRAP, PREV_ACTIONS, PREV_REWARDS
    from rlflow.envs.ma_envs import MultiAgentCartPole

    spec = get_algorithm(algo)
    model = {"use_lstm": True, "lstm_cell_size": 8, "hidden": [8], "max_seq_len": 4}
    model.update(lstm_use_prev_action=True, lstm_use_prev_reward=True)
    config = spec.config_cls(
        env=MultiAgentCartPole,
        env_config={"num_agents": 3},
        num_workers=0 if algo == "ppo" else 1,  # the last worker samples
        num_envs_per_worker=2,
        rollout_fragment_length=7,
        seed=3,
        model=model,
        policies={"a": PolicySpec(), "b": PolicySpec()},
        policy_mapping_fn=lambda agent: "a" if str(agent).endswith("0") else "b",
    )

    def sample(worker: Any) -> Any:
        fragments = [worker.sample() for _ in range(8)]
        return fragments, {pid: worker.get_policy(pid) for pid in ("a", "b")}

    workers = WorkerSet(config, spec.policy_cls)
    try:
        fragments, policies = workers.foreach_worker(sample)[-1]
    finally:
        workers.stop()
    for pid, policy in policies.items():
        lives: dict[tuple[int, int], list[SampleBatch]] = {}
        for fragment in fragments:
            batch = fragment.policy_batches[pid]
            tensors = policy.update.batch_to_tensors(batch)
            with torch.no_grad():
                dist, value = policy.model_outputs(tensors)
            steps = ~batch[BOOTSTRAP] if BOOTSTRAP in batch else np.ones(batch.count, bool)
            np.testing.assert_allclose(
                dist.numpy()[steps], batch[ACTION_DIST_INPUTS][steps], atol=1e-5
            )
            np.testing.assert_allclose(value.numpy()[steps], batch[VF_PREDS][steps], atol=1e-5)
            kept = SampleBatch({k: v[steps] for k, v in batch.items()})
            keys = list(zip(kept[EPS_ID].tolist(), kept[AGENT_INDEX].tolist(), strict=True))
            for key in dict.fromkeys(keys):
                rows = np.array([k == key for k in keys])
                lives.setdefault(key, []).append(SampleBatch({k: v[rows] for k, v in kept.items()}))
        assert any(len(pieces) > 1 for pieces in lives.values())  # a life spans fragments
        for pieces in lives.values():
            life = SampleBatch.concat_samples(pieces)
            # The previous action and reward inputs: zeros first, then the agent's own.
            np.testing.assert_array_equal(life[PREV_ACTIONS][1:], life["actions"][:-1])
            np.testing.assert_allclose(life[PREV_REWARDS][1:], life["rewards"][:-1])
            assert life[PREV_ACTIONS][0] == 0 and life[PREV_REWARDS][0] == 0.0
            state = [torch.from_numpy(x) for x in policy.initial_state(1)]
            with torch.no_grad():
                whole, _, _ = policy.model(
                    torch.from_numpy(life["obs"])[None],
                    state,
                    torch.from_numpy(life[PREV_ACTIONS])[None],
                    torch.from_numpy(life[PREV_REWARDS])[None],
                )
            np.testing.assert_allclose(whole[0].numpy(), life[ACTION_DIST_INPUTS], atol=1e-5)


@pytest.mark.parametrize(
    "extra", [{}, {"use_gru": True, "use_lstm": False, "lstm_use_prev_action": True}]
)
def test_an_exported_policy_with_memory_acts_as_the_trainer(tmp_path: Any, extra: Any) -> None:
    import rlflow

    model = {"use_lstm": True, "lstm_cell_size": 8, "hidden": [8], **extra}
    fields = {"env": ENV, "num_workers": 0, "seed": 4, "model": model}
    with Trainer("ppo", backend="local", min_time_s_per_iteration=0.0, **fields) as trainer:
        trainer.train()
        path = trainer.export_policy(tmp_path / "export")
        loaded = rlflow.load_policy(path)
        assert loaded.recurrent
        env = gym.make(ENV)
        obs, _ = env.reset(seed=0)
        state, mine = trainer.get_initial_state(), loaded.get_initial_state()
        prev = 0
        for _ in range(60):  # greedy actions and states, step by step, through episode ends
            action, state = trainer.compute_single_action(obs, state=state, prev_action=prev)
            got, mine = loaded.compute_single_action(obs, state=mine, prev_action=prev)
            assert got == action
            for a, b in zip(state, mine, strict=True):
                np.testing.assert_allclose(b, a, atol=1e-6)
            obs, _, terminated, truncated, _ = env.step(action)
            prev = action
            if terminated or truncated:
                obs, _ = env.reset()
                state, mine, prev = trainer.get_initial_state(), loaded.get_initial_state(), 0
    _, start = loaded.compute_actions(obs[None], prev_actions=[0])  # from the initial state
    assert [s.shape for s in start] == [(1, 8)] * len(mine)
    with pytest.raises(ConfigError, match="acts from its state"):  # stateless: refused
        loaded.actor.act(torch.from_numpy(obs[None]), explore=False, generator=loaded.generator)


def test_an_exported_recurrent_custom_model_acts_as_the_trainer(tmp_path: Any) -> None:
    import rlflow

    model = {"custom_model": _TinyGRU, "max_seq_len": 5}
    fields = {"env": ENV, "num_workers": 0, "seed": 2, "model": model, "train_batch_size": 256}
    with Trainer("ppo", backend="local", min_time_s_per_iteration=0.0, **fields) as trainer:
        trainer.train()
        loaded = rlflow.load_policy(trainer.export_policy(tmp_path / "export"))
        assert loaded.recurrent and type(loaded.actor).__name__ == "RecurrentCustomModelActor"
        env = gym.make(ENV)
        obs, _ = env.reset(seed=1)
        state, mine = trainer.get_initial_state(), loaded.get_initial_state()
        for _ in range(60):  # greedy actions and states, step by step, through episode ends
            action, state = trainer.compute_single_action(obs, state=state)
            got, mine = loaded.compute_single_action(obs, state=mine)
            assert got == action
            np.testing.assert_allclose(mine[0], state[0], atol=1e-6)
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                obs, _ = env.reset()
                state, mine = trainer.get_initial_state(), loaded.get_initial_state()
    with pytest.raises(ConfigError, match="acts from its state"):  # stateless: refused
        loaded.actor.act(torch.from_numpy(obs[None]), explore=False, generator=loaded.generator)


@pytest.mark.parametrize("algo", ["impala", "appo"])
def test_v_trace_sequences_with_bootstrap_rows_replay_what_was_sampled(
    local_backend: None, algo: str
) -> None:
    from rlflow.data.sample_batch import ACTIONS, BOOTSTRAP, REWARDS

    spec = get_algorithm(algo)
    model = {
        "use_lstm": True,
        "lstm_cell_size": 16,
        "max_seq_len": 7,
        "hidden": [8],
        "lstm_use_prev_action": True,
        "lstm_use_prev_reward": True,
    }
    config = spec.config_cls(
        env=ENV,
        num_workers=1,
        seed=0,
        num_envs_per_worker=3,
        rollout_fragment_length=30,
        model=model,
    )
    workers = WorkerSet(config, spec.policy_cls)
    try:
        policy = workers.local_worker().get_policy()
        batch = workers.local_worker().sample()
        with torch.no_grad():
            dist, value = policy.model_outputs(policy.update.batch_to_tensors(batch))
        stats = policy.update.learn_on_batch(batch)
    finally:
        workers.stop()
    steps = ~batch[BOOTSTRAP]
    np.testing.assert_allclose(dist.numpy()[steps], batch[ACTION_DIST_INPUTS][steps], atol=1e-6)
    np.testing.assert_allclose(value.numpy()[steps], batch[VF_PREDS][steps], atol=1e-6)
    ends = np.flatnonzero(batch[BOOTSTRAP])  # each bootstrap row: the last step's inputs next
    np.testing.assert_array_equal(batch[PREV_ACTIONS][ends], batch[ACTIONS][ends - 1])
    np.testing.assert_array_equal(batch[PREV_REWARDS][ends], batch[REWARDS][ends - 1])
    assert not batch[SEQ_START][ends].any() and np.isfinite(stats["total_loss"])


def test_multi_agent_policies_with_memory_train_on_their_sequences(local_backend: None) -> None:
    from rlflow.config import PolicySpec
    from rlflow.envs.ma_envs import MultiAgentCartPole

    model = {"use_lstm": True, "lstm_cell_size": 8, "hidden": [8], "max_seq_len": 5}
    with Trainer(
        "ppo",
        env=MultiAgentCartPole,
        num_workers=0,
        seed=0,
        model=model,
        train_batch_size=200,
        sgd_minibatch_size=50,
        num_sgd_iter=2,
        policies={"a": PolicySpec(), "b": PolicySpec()},
        policy_mapping_fn=lambda agent: "a" if str(agent).endswith("0") else "b",
    ) as trainer:
        before = {
            pid: trainer.workers.local_worker().get_policy(pid).get_weights() for pid in ("a", "b")
        }
        result = trainer.train()
        for pid in ("a", "b"):
            stats = result["info"]["learner"][pid]
            assert np.isfinite(stats["total_loss"]), stats
            after = trainer.workers.local_worker().get_policy(pid).get_weights()
            assert any(not np.array_equal(before[pid][k], after[k]) for k in after)

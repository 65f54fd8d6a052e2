"""RolloutWorker and WorkerSet on the local backend, with CountingEnv (every value is known)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from rlflow import flow
from rlflow.algorithms import A2CConfig, PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    ADVANTAGES,
    EPS_ID,
    LOGP,
    NUM_GRAD_UPDATES,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VALUE_TARGETS,
    VF_PREDS,
)
from rlflow.errors import ConfigError, WorkerError
from rlflow.testing.envs import CountingEnv
from rlflow.workers import RolloutWorker, WorkerSet, current_worker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def counting_config(**kw: object) -> PGConfig:
    base: dict[str, object] = {
        "env": CountingEnv,
        "env_config": {"episode_len": 3},
        "num_workers": 0,
        "num_envs_per_worker": 2,
        "rollout_fragment_length": 5,
        "gamma": 0.5,
        "model": {"hidden": (8,)},
    }
    base.update(kw)
    return PGConfig(**base)  # type: ignore[arg-type]


def test_sample_shape_columns_and_env_major_order() -> None:
    worker = RolloutWorker(counting_config(), PGPolicy, worker_index=0)
    batch = worker.sample()
    assert batch.count == 10
    expected = {OBS, ACTIONS, REWARDS, TERMINATEDS, TRUNCATEDS, LOGP, VF_PREDS}
    expected |= {ACTION_DIST_INPUTS, ADVANTAGES, VALUE_TARGETS, EPS_ID, NUM_GRAD_UPDATES}
    assert set(batch) == expected
    assert batch[NUM_GRAD_UPDATES].tolist() == [0] * 10  # the weights' version: no update yet
    # Rows are sub-env 0's 5 steps, then sub-env 1's; obs count steps within episodes of 3.
    assert batch[OBS][:, 0].tolist() == [0, 1, 2, 0, 1] * 2
    assert batch[TERMINATEDS].tolist() == [False, False, True, False, False] * 2
    assert not batch[TRUNCATEDS].any()
    eps = batch[EPS_ID].tolist()
    assert eps[0] == eps[1] == eps[2] != eps[3] == eps[4]
    assert len(set(eps)) == 4  # two episodes per sub-env, ids unique across sub-envs


def test_returns_use_zero_bootstrap_after_termination_and_without_critic() -> None:
    worker = RolloutWorker(counting_config(), PGPolicy, worker_index=0)
    batch = worker.sample()
    # gamma 0.5, reward 1: a terminated episode of 3 -> [1.75, 1.5, 1.0]; the unfinished
    # fragment of 2 is cut (no critic: bootstrap 0) -> [1.5, 1.0].
    assert batch[ADVANTAGES][:5].tolist() == [1.75, 1.5, 1.0, 1.5, 1.0]


def test_truncation_bootstraps_from_the_final_observation() -> None:
    config = counting_config(
        env_config={"episode_len": 3, "truncate": True},
        use_critic=True,
        num_envs_per_worker=1,
        rollout_fragment_length=3,
    )
    worker = RolloutWorker(config, PGPolicy, worker_index=0)
    batch = worker.sample()
    assert batch[TRUNCATEDS].tolist() == [False, False, True]
    v_final = float(worker.get_policy().value(np.array([[3.0]], dtype=np.float32))[0])
    assert batch[VALUE_TARGETS][2] == pytest.approx(1.0 + 0.5 * v_final, rel=1e-5)


def test_unfinished_fragment_bootstraps_from_the_next_observation() -> None:
    config = A2CConfig(
        env=CountingEnv,
        env_config={"episode_len": 10},
        num_workers=0,
        rollout_fragment_length=2,
        gamma=0.5,
        use_gae=False,
    )
    worker = RolloutWorker(config, PGPolicy, worker_index=0)
    batch = worker.sample()
    v_next = float(worker.get_policy().value(np.array([[2.0]], dtype=np.float32))[0])
    assert batch[VALUE_TARGETS][1] == pytest.approx(1.0 + 0.5 * v_next, rel=1e-5)


def test_episode_stats_are_popped_once() -> None:
    worker = RolloutWorker(counting_config(), PGPolicy, worker_index=0)
    worker.sample()
    stats = worker.pop_episode_stats()
    assert [(s.return_, s.length) for s in stats] == [(3.0, 3), (3.0, 3)]
    assert worker.pop_episode_stats() == []


def test_local_worker_builds_no_envs_until_it_samples() -> None:
    worker = RolloutWorker(counting_config(), PGPolicy, worker_index=0)
    assert worker._sampler is None  # no sampler, so no envs
    assert worker.pop_episode_stats() == []


def test_state_round_trip_continues_identically() -> None:
    config = PGConfig(num_workers=0, num_envs_per_worker=2, rollout_fragment_length=30)
    worker = RolloutWorker(config, PGPolicy, worker_index=0)
    worker.sample()
    worker.learn_on_batch(worker.sample(), num_sgd_iter=2, sgd_minibatch_size=16)
    state = pickle.loads(pickle.dumps(worker.get_state()))
    first = worker.sample()
    stats_first = worker.learn_on_batch(first, num_sgd_iter=2, sgd_minibatch_size=16)
    worker.set_state(state)
    second = worker.sample()
    stats_second = worker.learn_on_batch(second, num_sgd_iter=2, sgd_minibatch_size=16)
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])
    assert stats_first == stats_second


def test_gradients_weights_and_learning() -> None:
    worker = RolloutWorker(counting_config(), PGPolicy, worker_index=0)
    batch = worker.sample()
    before = worker.get_weights()
    grads = worker.compute_gradients(batch)
    assert grads.env_steps == 10 and set(grads.grads) == {DEFAULT_POLICY_ID}
    for name, w in worker.get_weights()[DEFAULT_POLICY_ID].items():
        np.testing.assert_array_equal(w, before[DEFAULT_POLICY_ID][name])
    worker.apply_gradients(grads.grads)
    after = worker.get_weights()[DEFAULT_POLICY_ID]
    assert any(not np.array_equal(after[k], before[DEFAULT_POLICY_ID][k]) for k in after)
    stats = worker.learn_on_batch(batch, num_sgd_iter=3, sgd_minibatch_size=5)
    assert stats[DEFAULT_POLICY_ID]["num_steps"] == 6.0
    worker.set_weights(before, {"timestep": 7})
    assert worker.global_vars == {"timestep": 7}
    restored = worker.get_weights()[DEFAULT_POLICY_ID]
    for name, w in restored.items():
        np.testing.assert_array_equal(w, before[DEFAULT_POLICY_ID][name])


def test_unknown_policy_and_bad_index_raise_config_errors() -> None:
    worker = RolloutWorker(counting_config(), PGPolicy, worker_index=0)
    with pytest.raises(ConfigError, match="no policy 'nope'"):
        worker.get_policy("nope")
    with pytest.raises(ConfigError, match="worker_index"):
        RolloutWorker(counting_config(), PGPolicy, worker_index=-1)


def test_current_worker_outside_a_stream_raises() -> None:
    with pytest.raises(ConfigError, match="outside a rollout worker"):
        current_worker()


def test_worker_set_sync_and_foreach() -> None:
    workers = WorkerSet(counting_config(num_workers=2), PGPolicy)
    assert len(workers.remote_workers()) == 2
    local = workers.local_worker()
    local.learn_on_batch(local.sample())
    workers.sync_weights({"timestep": 3}, blocking=True)
    remote_weights = [flow.get(w.get_weights.remote()) for w in workers.remote_workers()]
    for weights in remote_weights:
        for name, w in weights[DEFAULT_POLICY_ID].items():
            np.testing.assert_array_equal(w, local.get_weights()[DEFAULT_POLICY_ID][name])
    assert workers.foreach_worker(lambda w: w.worker_index) == [0, 1, 2]
    assert workers.foreach_worker(lambda w: w.global_vars.get("timestep")) == [None, 3, 3]
    workers.stop()
    assert workers.remote_workers() == []


def test_worker_set_takes_a_learner_built_before_it_and_only_as_index_0() -> None:
    config = counting_config(num_workers=1)
    learner = RolloutWorker(config, PGPolicy, worker_index=0)
    workers = WorkerSet(config, PGPolicy, local_worker=learner)
    assert workers.local_worker() is learner
    assert workers.foreach_worker(lambda w: w.worker_index) == [0, 1]
    workers.stop()
    stray = RolloutWorker(config, PGPolicy, worker_index=2)
    with pytest.raises(ConfigError, match=r"local_worker=RolloutWorker\(index=2\).*index 0"):
        WorkerSet(config, PGPolicy, local_worker=stray)


def test_a_policy_that_cannot_take_the_envs_spaces_is_named_with_the_algorithm() -> None:
    from rlflow.algorithms import DQNConfig
    from rlflow.algorithms.dqn.policy import DQNPolicy

    with pytest.raises(ConfigError) as info:
        RolloutWorker(DQNConfig(env="Pendulum-v1"), DQNPolicy, worker_index=0, algorithm="dqn")
    assert "algorithm 'dqn' cannot use env 'Pendulum-v1': its action space is Box(" in str(
        info.value
    )
    with pytest.raises(ConfigError, match="algorithm 'DQNConfig' cannot use env"):
        RolloutWorker(DQNConfig(env="Pendulum-v1"), DQNPolicy, worker_index=0)


def test_dead_worker_is_named_by_index() -> None:
    workers = WorkerSet(counting_config(num_workers=2), PGPolicy)
    flow.kill(workers.remote_workers()[1])
    assert workers.dead_workers() == [2]
    with pytest.raises(WorkerError, match="rollout worker 2"):
        workers.sync_weights(blocking=True)
    with pytest.raises(WorkerError, match="rollout worker 2"):
        workers.foreach_worker(lambda w: w.worker_index)

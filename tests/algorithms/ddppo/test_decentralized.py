"""DD-PPO's parts on the local backend: the weighted all-reduce of own batches, the preempted
fragment, and rounds that keep every worker's weights equal."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from rlflow import flow
from rlflow.algorithms import get_algorithm
from rlflow.algorithms.ddppo import DDPPOConfig
from rlflow.algorithms.ddppo.decentralized import (
    PREEMPTED,
    RecordRound,
    RoundReport,
    decentralized_rounds,
)
from rlflow.algorithms.ppo import PPOConfig, PPOPolicy
from rlflow.data import SampleBatch
from rlflow.learner import DataParallel, serve_store
from rlflow.workers import RolloutWorker, WorkerSet

pytestmark = pytest.mark.timeout(300)

TINY = {
    "env": "CartPole-v1",
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 16,
    "train_batch_size": 32,
    "sgd_minibatch_size": 16,
    "num_sgd_iter": 2,
    "seed": 3,
}


def flat_weights(weights: dict[str, Any]) -> np.ndarray:
    """One policy's weights (``{name: array}``) as one flat array, in name order."""
    return np.concatenate([np.asarray(weights[k]).ravel() for k in sorted(weights)])


def _in_threads(fns: list[Callable[[], Any]]) -> list[Any]:
    out: list[Any] = [None] * len(fns)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            out[k] = fns[k]()
        except BaseException as err:  # re-raised below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
    return out


def _ppo_batch(policy: PPOPolicy, rows: int, seed: int) -> SampleBatch:
    """``rows`` rows of made-up CartPole experience with the policy's own outputs."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(rows, 4)).astype(np.float32)
    actions, extra = policy.compute_actions(obs, explore=True)
    return SampleBatch(
        {
            "obs": obs,
            "actions": actions,
            "advantages": rng.normal(size=rows).astype(np.float32),
            "value_targets": rng.normal(size=rows).astype(np.float32),
            **{k: v for k, v in extra.items() if k in ("logp", "action_dist_inputs", "vf_preds")},
        }
    )


@pytest.fixture
def policies() -> Iterator[list[PPOPolicy]]:
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    config = PPOConfig(env="CartPole-v1", lr=1e-2, grad_clip=None)
    made = [PPOPolicy(env.observation_space, env.action_space, config, seed=1) for _ in range(3)]
    for p in made[1:]:
        p.set_weights(made[0].get_weights())
    yield made


def test_own_batches_gradient_is_the_gradient_on_their_union(policies: list[PPOPolicy]) -> None:
    """Two ranks with batches of 30 and 10 rows get, each, the gradient one policy computes on
    all 40 rows (their gradients weighted by the batches' shares, 3/4 and 1/4, not halved),
    and then take the same step."""
    alone, first, second = policies
    a, b = _ppo_batch(alone, 30, seed=0), _ppo_batch(alone, 10, seed=1)
    union = SampleBatch.concat_samples([a, b])
    want, _ = alone.update.compute_gradients(union)
    halves = [alone.update.compute_gradients(x)[0] for x in (a, b)]
    store, _ = serve_store(None, 30.0)

    def learn(rank: int, policy: PPOPolicy, batch: SampleBatch) -> tuple[float, list[Any]]:
        parallel = DataParallel(rank, 2, store, own_batches=True, timeout_s=30.0)
        policy.update.data_parallel = parallel
        share = parallel.batch_share(batch.count)
        grads, _ = policy.update.compute_gradients(batch)
        policy.update.learn_on_batch(batch)
        return share, grads

    (share_a, grads_a), (share_b, grads_b) = _in_threads(
        [lambda: learn(0, first, a), lambda: learn(1, second, b)]
    )
    assert (share_a, share_b) == (0.75, 0.25)
    for got_a, got_b, w, ha, hb in zip(grads_a, grads_b, want, *halves, strict=True):
        np.testing.assert_array_equal(got_a, got_b)
        np.testing.assert_allclose(got_a, w, rtol=1e-4, atol=1e-6)
        assert not np.allclose((ha + hb) / 2, w, rtol=1e-4, atol=1e-6) or not w.any()
    alone.update.learn_on_batch(union)
    np.testing.assert_array_equal(
        flat_weights(first.get_weights()), flat_weights(second.get_weights())
    )
    np.testing.assert_allclose(
        flat_weights(first.get_weights()), flat_weights(alone.get_weights()), rtol=1e-5, atol=1e-6
    )


def test_ranks_with_batches_of_different_sizes_take_as_many_minibatch_steps(
    policies: list[PPOPolicy],
) -> None:
    """A full batch (100 rows at 50 per minibatch: 2) and a preempted one (30 rows) agree on
    2 minibatches per epoch: both take num_sgd_iter * 2 steps and stay equal."""
    _, first, second = policies
    a, b = _ppo_batch(first, 100, seed=2), _ppo_batch(first, 30, seed=3)
    store, _ = serve_store(None, 30.0)

    def learn(rank: int, policy: PPOPolicy, batch: SampleBatch) -> dict[str, Any]:
        policy.update.data_parallel = DataParallel(rank, 2, store, own_batches=True)
        rng = np.random.default_rng(rank)  # each worker shuffles its own batch
        return policy.update.learn_on_minibatches(
            batch, num_sgd_iter=3, sgd_minibatch_size=50, rng=rng
        )

    stats = _in_threads([lambda: learn(0, first, a), lambda: learn(1, second, b)])
    assert [s["num_steps"] for s in stats] == [6.0, 6.0]
    assert first.update.num_grad_updates == second.update.num_grad_updates == 6
    np.testing.assert_array_equal(
        flat_weights(first.get_weights()), flat_weights(second.get_weights())
    )


def test_a_rank_without_rows_of_a_policy_still_meets_the_others(
    policies: list[PPOPolicy],
) -> None:
    """A worker none of whose agents a policy played (multi-agent) learns on an empty batch
    of it: it takes part in every all-reduce, adds nothing, and takes the same steps."""
    alone, first, second = policies
    a = _ppo_batch(first, 40, seed=4)
    alone.update.learn_on_minibatches(
        a, num_sgd_iter=2, sgd_minibatch_size=20, rng=np.random.default_rng(0)
    )
    store, _ = serve_store(None, 30.0)

    def learn(rank: int, policy: PPOPolicy, batch: SampleBatch) -> dict[str, Any]:
        policy.update.data_parallel = DataParallel(rank, 2, store, own_batches=True)
        return policy.update.learn_on_minibatches(
            batch, num_sgd_iter=2, sgd_minibatch_size=20, rng=np.random.default_rng(0)
        )

    stats = _in_threads([lambda: learn(0, first, a), lambda: learn(1, second, SampleBatch({}))])
    assert [s["num_steps"] for s in stats] == [4.0, 4.0]
    np.testing.assert_array_equal(
        flat_weights(first.get_weights()), flat_weights(second.get_weights())
    )
    # The empty rank added nothing: the steps are those of rank 0's batch alone.
    np.testing.assert_allclose(
        flat_weights(first.get_weights()), flat_weights(alone.get_weights()), rtol=1e-5, atol=1e-6
    )


def test_a_preempted_fragment_is_the_fragment_of_that_length(local_backend: None) -> None:
    """Cut short after 5 steps, a fragment is exactly what a worker sampling 5-step fragments
    gives (same seed): the same rows, bootstrapped from V of the next observations; the envs
    go on from there."""
    config = PPOConfig(**{**TINY, "rollout_fragment_length": 20, "train_batch_size": 40})
    asked: list[int] = []

    def preempt(steps: int) -> bool:
        asked.append(steps)
        return steps >= 5

    cut = RolloutWorker(config, PPOPolicy, worker_index=1).sample(preempt=preempt)
    short = config.replace(rollout_fragment_length=5, train_batch_size=10, sgd_minibatch_size=10)
    whole = RolloutWorker(short, PPOPolicy, worker_index=1).sample()
    assert asked == [1, 2, 3, 4, 5]
    assert cut.count == whole.count == 10 and cut.env_steps() == 10
    assert sorted(cut) == sorted(whole)
    for key in whole:
        np.testing.assert_array_equal(cut[key], whole[key], err_msg=key)


def test_rounds_keep_every_workers_weights_equal(local_backend: None) -> None:
    """After every round (every all-reduced update) the workers' weights are equal, the
    local worker holds them (keep_local_weights_in_sync) and the steps are counted."""
    config = DDPPOConfig(**TINY, num_workers=2)
    workers = WorkerSet(config, get_algorithm("ddppo").policy_cls)
    try:
        before = flat_weights(workers.local_worker().get_weights()["default_policy"])
        rounds = decentralized_rounds(workers, config)
        reports: list[list[RoundReport]] = []
        train_op = rounds.for_each(lambda r: reports.append(r) or RecordRound(workers)(r))
        last = before
        for n in range(1, 4):
            next(train_op)
            weights = [
                flat_weights(flow.get(w.get_weights.remote())["default_policy"])
                for w in workers.remote_workers()
            ]
            np.testing.assert_array_equal(weights[0], weights[1])
            local = flat_weights(workers.local_worker().get_weights()["default_policy"])
            np.testing.assert_array_equal(local, weights[0])
            assert not np.array_equal(weights[0], last)  # an update happened
            last = weights[0]
            assert [r.env_steps for r in reports[-1]] == [32, 32]
            assert not any(r.preempted for r in reports[-1])
            counters = train_op.metrics.counters
            assert counters["num_env_steps_trained"] == counters["num_env_steps_sampled"]
            assert counters["num_env_steps_sampled"] == 64 * n
            assert counters["num_train_steps"] == n and counters[PREEMPTED] == 0
        # 2 epochs of 2 minibatches per round on each worker
        assert workers.local_worker().get_policy().update.num_grad_updates == 12
        train_op.close()
    finally:
        workers.stop()


def test_the_plan_runs_on_the_local_backend(local_backend: None) -> None:
    spec = get_algorithm("ddppo")
    config = DDPPOConfig(**TINY, num_workers=2, min_steps_per_iteration=128)
    workers = WorkerSet(config, spec.policy_cls)
    try:
        plan = spec.plan(workers, config)
        result = next(plan)
        assert result["num_env_steps_sampled"] == 128 == result["num_env_steps_trained"]
        assert "default_policy" in result["info"]["learner"]
        plan.close()
    finally:
        workers.stop()


def test_a_checkpoint_restores_every_workers_trained_state(
    local_backend: None, tmp_path: Any
) -> None:
    """A checkpoint holds each worker's state (weights and optimizer): a restored run's
    workers start equal to the saved ones and go on in step."""
    from rlflow import Trainer

    fields = {**TINY, "num_workers": 2, "min_steps_per_iteration": 64, "loggers": ()}
    with Trainer("ddppo", backend="local", logdir=str(tmp_path / "a"), **fields) as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        saved = [
            flat_weights(flow.get(w.get_weights.remote())["default_policy"])
            for w in trainer.workers.remote_workers()
        ]
    restored = Trainer.restore(path, logdir=str(tmp_path / "b"))
    with restored:
        remote = restored.workers.remote_workers()
        for handle, want in zip(remote, saved, strict=True):
            got = flat_weights(flow.get(handle.get_weights.remote())["default_policy"])
            np.testing.assert_array_equal(got, want)
        result = restored.train()
        assert result["num_env_steps_sampled"] == 128
        after = [flat_weights(flow.get(w.get_weights.remote())["default_policy"]) for w in remote]
        np.testing.assert_array_equal(after[0], after[1])
        assert not np.array_equal(after[0], saved[0])


def _by_agent(agent: str) -> str:
    return "p0" if agent == "agent_0" else "p1"


def test_two_policies_learn_decentralized_on_a_multi_agent_env(local_backend: None) -> None:
    """multi_cartpole with a policy per pole: each policy's advantages are standardized and its
    steps all-reduced on its own; every policy stays equal across the workers."""
    from rlflow import Trainer

    config = {
        "env": "multi_cartpole",
        "env_config": {"num_agents": 2, "respawn": True, "horizon": 25},
        "policies": {"p0": {}, "p1": {}},
        "policy_mapping_fn": _by_agent,
        "num_workers": 2,
        "num_envs_per_worker": 1,
        "rollout_fragment_length": 25,
        "train_batch_size": 25,
        "sgd_minibatch_size": 25,
        "num_sgd_iter": 2,
        "seed": 0,
        "loggers": (),
    }
    with Trainer("ddppo", config=config, backend="local") as trainer:
        before = trainer.workers.local_worker().get_weights()
        result = trainer.train()
        assert sorted(result["info"]["learner"]) == ["p0", "p1"]
        remote = [flow.get(w.get_weights.remote()) for w in trainer.workers.remote_workers()]
        for pid in ("p0", "p1"):
            first, second = (flat_weights(r[pid]) for r in remote)
            np.testing.assert_array_equal(first, second)
            assert not np.array_equal(first, flat_weights(before[pid]))

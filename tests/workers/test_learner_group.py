"""Data-parallel learners (``num_learners``): the same update as one learner, on gloo.

On the local backend the learners are threads of this process joined by a gloo process group
over an in-process store: the code path of the Ray actors but the store (their Ray twin is in
``test_learner_group_ray.py``). Each test trains one learner (``num_learners=0``, the driver's
local worker) and a group on the same batch from the same initial state, and compares weights
to float32 tolerance.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlflow import Trainer
from rlflow.algorithms import get_algorithm, tuned_config
from rlflow.config.resources import check_cluster_fits
from rlflow.data import SampleBatch
from rlflow.data.sample_batch import BATCH_INDEXES, BOOTSTRAP, TD_ERROR, WEIGHTS
from rlflow.data.sequences import SequenceLayout
from rlflow.errors import ConfigError
from rlflow.learner.data_parallel import shard_bounds
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)


def _train(
    algo: str, env: str, learners: int, batch: Any, overrides: dict[str, Any], **options: Any
) -> tuple[dict[str, np.ndarray], dict[str, Any], WorkerSet]:
    """One ``learn_on_batch`` of ``algo``'s tuned config with ``learners`` learner actors."""
    spec = get_algorithm(algo)
    workers_ = 1 if algo == "impala" else 0  # IMPALA needs one; its learner never samples
    config = tuned_config(
        algo, env, num_workers=workers_, seed=7, num_learners=learners, **overrides
    )
    workers = WorkerSet(config, spec.policy_cls)
    try:
        stats = workers.learner().learn_on_batch(batch, **options)["default_policy"]
        state = workers.local_worker().get_policy().get_state()
    finally:
        workers.stop()
    return state["weights"], stats, workers


def _sample(algo: str, env: str, rows: int, **overrides: Any) -> SampleBatch:
    spec = get_algorithm(algo)
    config = tuned_config(
        algo, env, **{"num_workers": 0, **overrides}, seed=7, rollout_fragment_length=rows
    )
    workers = WorkerSet(config, spec.policy_cls)
    try:
        batch = workers.local_worker().sample()
    finally:
        workers.stop()
    assert isinstance(batch, SampleBatch)
    return batch


def _assert_same_weights(one: dict[str, np.ndarray], many: dict[str, np.ndarray]) -> None:
    assert set(one) == set(many)
    for name in one:
        np.testing.assert_allclose(many[name], one[name], rtol=1e-5, atol=2e-6, err_msg=name)


def _moved(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> float:
    return max(float(np.abs(after[k] - before[k]).max()) for k in before)


@pytest.mark.parametrize("learners", [2, 3])
def test_ppo_minibatch_epochs_on_learners_equal_one_learner(
    local_backend: None, learners: int
) -> None:
    batch = _sample("ppo", "CartPole-v1", 300)
    options = {"num_sgd_iter": 3, "sgd_minibatch_size": 100}  # 100 rows: 3 shards of 33-34
    one, one_stats, _ = _train("ppo", "CartPole-v1", 0, batch, {}, **options)
    many, many_stats, _ = _train("ppo", "CartPole-v1", learners, batch, {}, **options)
    initial = (
        WorkerSet(
            tuned_config("ppo", "CartPole-v1", num_workers=0, seed=7),
            get_algorithm("ppo").policy_cls,
        )
        .local_worker()
        .get_policy()
        .get_weights()
    )
    assert _moved(initial, one) > 1e-3  # the update did something
    _assert_same_weights(one, many)
    # The loss and the gradient norm are all-reduced: the whole minibatch's, on every learner.
    assert many_stats["total_loss"] == pytest.approx(one_stats["total_loss"], rel=1e-5)
    assert many_stats["grad_gnorm"] == pytest.approx(one_stats["grad_gnorm"], rel=1e-5)
    assert many_stats["num_steps"] == one_stats["num_steps"] == 3 * (batch.count // 100)


def test_dqn_prioritized_step_on_learners_equals_one_learner(local_backend: None) -> None:
    batch = _sample("dqn", "CartPole-v1", 64)
    rng = np.random.default_rng(0)
    batch[WEIGHTS] = rng.uniform(0.2, 1.0, batch.count).astype(np.float32)
    batch[BATCH_INDEXES] = np.arange(100, 100 + batch.count)
    one, one_stats, _ = _train("dqn", "CartPole-v1", 0, batch, {})
    many, many_stats, _ = _train("dqn", "CartPole-v1", 2, batch, {})
    _assert_same_weights(one, many)
    # Each learner's TD errors are its shard's; merged in rank order they are the batch's.
    np.testing.assert_allclose(many_stats[TD_ERROR], one_stats[TD_ERROR], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(many_stats[BATCH_INDEXES], batch[BATCH_INDEXES])


@pytest.mark.parametrize("minibatch", [0, 60])
def test_vtrace_step_on_learners_equals_one_learner(local_backend: None, minibatch: int) -> None:
    batch = _sample("impala", "CartPole-v1", 50, num_envs_per_worker=4, num_workers=1)
    assert SequenceLayout.of(batch).num_sequences >= 4  # type: ignore[union-attr]  # sequences to share among the learners
    options = {} if not minibatch else {"num_sgd_iter": 2, "sgd_minibatch_size": minibatch}
    one, one_stats, _ = _train("impala", "CartPole-v1", 0, batch, {}, **options)
    many, many_stats, _ = _train("impala", "CartPole-v1", 2, batch, {}, **options)
    _assert_same_weights(one, many)
    assert many_stats["total_loss"] == pytest.approx(one_stats["total_loss"], rel=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("learners", "gpus", "backend"), [(1, 1.0, "nccl"), (2, 0.5, "gloo")])
def test_gpu_learners_equal_the_driver_gpu_learner(
    local_backend: None, learners: int, gpus: float, backend: str
) -> None:
    """A learner with a GPU of its own all-reduces over NCCL; two sharing one over gloo, through
    host memory; either way the update is the driver's GPU learner's."""
    batch = _sample("ppo", "CartPole-v1", 300)
    options = {"num_sgd_iter": 3, "sgd_minibatch_size": 100}
    one, one_stats, _ = _train("ppo", "CartPole-v1", 0, batch, {"num_gpus": 1}, **options)
    many, many_stats, workers = _train(
        "ppo", "CartPole-v1", learners, batch, {"num_gpus_per_learner": gpus}, **options
    )
    group = workers.learner_group()
    assert group is not None
    for learner in group.learners():
        assert learner.data_parallel is not None and learner.data_parallel.backend == backend
        assert learner.worker.get_policy().device.type == "cuda"
    _assert_same_weights(one, many)
    assert many_stats["total_loss"] == pytest.approx(one_stats["total_loss"], rel=1e-5)


def test_sac_step_on_learners_equals_one_learner(local_backend: None) -> None:
    batch = _sample("sac", "Pendulum-v1", 64)
    one, _, _ = _train("sac", "Pendulum-v1", 0, batch, {})
    many, _, _ = _train("sac", "Pendulum-v1", 2, batch, {})
    _assert_same_weights(one, many)


def test_vtrace_shards_are_whole_sequences_weighted_by_steps(local_backend: None) -> None:
    batch = _sample("impala", "CartPole-v1", 30, num_envs_per_worker=3, num_workers=1)
    spec = get_algorithm("impala")
    config = tuned_config("impala", "CartPole-v1", num_workers=1, seed=7, num_learners=2)
    workers = WorkerSet(config, spec.policy_cls)
    try:
        learners = workers.learner_group().learners()  # type: ignore[union-attr]
        shards = [learner.worker.get_policy().update.shard(batch) for learner in learners]
    finally:
        workers.stop()
    assert shards[0][0] == 0 and shards[0][1] == shards[1][0] and shards[1][1] == batch.count
    assert sum(weight for _, _, weight in shards) == pytest.approx(1.0)
    for start, end, weight in shards:
        part = batch.slice(start, end)
        assert part[BOOTSTRAP][-1]  # every shard ends with a bootstrap row: whole sequences
        assert weight == pytest.approx(part.env_steps() / batch.env_steps())


def test_shard_bounds_cover_every_row_once() -> None:
    for count in (0, 1, 5, 64, 101):
        for world in (1, 2, 3, 7):
            bounds = [shard_bounds(count, k, world) for k in range(world)]
            assert bounds[0][0] == 0 and bounds[-1][1] == count
            assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
            sizes = [end - start for start, end in bounds]
            assert max(sizes) - min(sizes) <= 1


def test_checkpoint_with_learners_continues_identically(
    local_backend: None, tmp_path: Path
) -> None:
    fields = {
        "env": "CartPole-v1",
        "num_workers": 1,
        "seed": 3,
        "num_learners": 2,
        "train_batch_size": 256,
        "rollout_fragment_length": 256,
        "sgd_minibatch_size": 64,
        "num_sgd_iter": 2,
        "min_time_s_per_iteration": 0.0,  # iterations by steps alone, as the restored run's
    }
    with Trainer("ppo", backend="local", **fields) as trainer:
        trainer.train()
        trainer.train()
        checkpoint = trainer.save(tmp_path / "ckpt")
        expected_results = [trainer.train(), trainer.train()]
        expected = trainer.workers.local_worker().get_policy().get_state()
    with Trainer.restore(checkpoint, backend="local") as restored:
        results = [restored.train(), restored.train()]
        group = restored.workers.learner_group()
        assert group is not None and group.num_learners == 2
        learner_weights = [
            learner.worker.get_policy().get_weights() for learner in group.learners()
        ]
        got = restored.workers.local_worker().get_policy().get_state()
    for a, b in zip(expected_results, results, strict=True):
        assert b["num_env_steps_trained"] == a["num_env_steps_trained"]
        assert b["info"]["learner"] == a["info"]["learner"]  # the same losses, to the bit
    _assert_same_weights(expected["weights"], got["weights"])
    assert got["num_grad_updates"] == expected["num_grad_updates"] == 4 * 2 * 4
    for weights in learner_weights:  # every learner holds the published weights
        _assert_same_weights(got["weights"], weights)


def test_learner_fields_are_checked_before_anything_starts() -> None:
    ppo = get_algorithm("ppo").config_cls
    with pytest.raises(ConfigError, match="num_gpus_per_learner"):
        ppo(num_learners=2, num_gpus=1)
    with pytest.raises(ConfigError, match="num_learners"):
        ppo(num_learners=-1)
    with pytest.raises(ConfigError, match="num_cpus_per_learner"):
        ppo(num_learners=1, num_cpus_per_learner=-1)
    with pytest.raises(ConfigError, match="A3C's gradients are computed by the rollout workers"):
        get_algorithm("a3c").config_cls(num_learners=2)
    with pytest.raises(ConfigError, match="microbatch_size"):
        get_algorithm("a2c").config_cls(num_learners=2, microbatch_size=50)
    with pytest.raises(ConfigError, match="MAML"):
        get_algorithm("maml").config_cls(num_learners=2)


def test_learner_gpus_that_are_not_there_are_refused(local_backend: None) -> None:
    import torch

    from rlflow.config.resources import check_gpus

    config = get_algorithm("ppo").config_cls(num_learners=2, num_gpus_per_learner=0.5)
    with pytest.raises(ConfigError, match=r"num_gpus_per_learner=0.5 x num_learners=2 needs 1"):
        check_gpus(config, cluster_gpus=0.0)
    check_gpus(config, cluster_gpus=1.0)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="this process has 0"):
            WorkerSet(config, get_algorithm("ppo").policy_cls)


def test_learners_that_do_not_fit_the_cluster_are_refused_naming_the_fields() -> None:
    ppo = get_algorithm("ppo").config_cls
    config = ppo(num_workers=2, num_learners=2)
    with pytest.raises(ConfigError, match=r"num_learners=2 .*CPU: 4 needed, 2 in the cluster"):
        check_cluster_fits(config, [{"CPU": 2.0}])
    check_cluster_fits(ppo(num_workers=2, num_learners=2, num_cpus_per_learner=0), [{"CPU": 2.0}])
    with pytest.raises(ConfigError, match="num_gpus_per_learner=1"):
        check_cluster_fits(ppo(num_learners=2, num_gpus_per_learner=1), [{"CPU": 8.0, "GPU": 1.0}])


def test_rollouts_by_reference_are_the_batches_left_where_they_were_sampled(
    local_backend: None,
) -> None:
    from rlflow.data.refs import BatchRef, BatchRefs
    from rlflow.ops import ConcatBatches, parallel_rollouts

    spec = get_algorithm("impala")
    config = tuned_config("impala", "CartPole-v1", num_workers=2, seed=4)
    batches = []
    for by_reference in (False, True):
        workers = WorkerSet(config, spec.policy_cls)
        try:
            stream = parallel_rollouts(workers, mode="bulk_sync", by_reference=by_reference)
            combined = stream.combine(ConcatBatches(3 * config.rollout_fragment_length))
            batches.append(combined.take(1)[0])
            counted = stream.metrics.counters["num_env_steps_sampled"]
        finally:
            workers.stop()
        assert counted == batches[-1].env_steps()  # the driver counts without the data
    plain, refs = batches
    assert isinstance(refs, BatchRefs) and all(isinstance(p, BatchRef) for p in refs.parts)
    assert refs.env_steps() == plain.env_steps() and refs.count == plain.count
    resolved = refs.resolve()
    assert set(resolved) == set(plain)
    for name in plain:
        np.testing.assert_array_equal(resolved[name], plain[name], err_msg=name)

"""Learner actors on Ray: gloo over the driver's TCP store, and a killed learner restarted."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlflow import Trainer, flow
from rlflow.algorithms import get_algorithm, tuned_config
from rlflow.workers import WorkerSet

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

FIELDS: dict[str, Any] = {
    "env": "CartPole-v1",
    "num_workers": 1,
    "seed": 5,
    "num_learners": 2,
    "num_cpus_per_learner": 0,  # 2 CPUs: one rollout worker, two learners beside it
    "train_batch_size": 512,
    "rollout_fragment_length": 512,
    "sgd_minibatch_size": 128,
    "num_sgd_iter": 2,
    "min_time_s_per_iteration": 0.0,
}


def _learner_weights(trainer: Trainer) -> list[dict[str, np.ndarray]]:
    group = trainer.workers.learner_group()
    assert group is not None
    refs = [learner.apply.remote(lambda w: w.get_weights()) for learner in group.learners()]
    return [w["default_policy"] for w in flow.get(refs)]


def _max_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


def test_learner_actors_update_as_one_learner(ray_backend: None) -> None:
    spec = get_algorithm("ppo")
    config = tuned_config("ppo", "CartPole-v1", num_workers=0, seed=5, rollout_fragment_length=256)
    sampler = WorkerSet(config, spec.policy_cls)
    batch = sampler.local_worker().sample()
    sampler.stop()
    weights = []
    for learners in (0, 2):
        workers = WorkerSet(
            config.replace(num_learners=learners, num_cpus_per_learner=0), spec.policy_cls
        )
        try:
            workers.learner().learn_on_batch(batch, num_sgd_iter=2, sgd_minibatch_size=128)
            weights.append(workers.local_worker().get_policy().get_weights())
        finally:
            workers.stop()
    assert _max_diff(weights[0], weights[1]) < 2e-6


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("learners", "gpus", "backend"), [(1, 1.0, "nccl"), (2, 0.5, "gloo")])
def test_learner_actors_on_the_gpu_update_as_the_driver_gpu_learner(
    ray_backend: None, learners: int, gpus: float, backend: str
) -> None:
    """Ray gives each learner actor its GPU (``num_gpus_per_learner``): one of its own joins
    NCCL, two sharing one join gloo; the weights are the driver's GPU learner's."""
    spec = get_algorithm("ppo")
    config = tuned_config("ppo", "CartPole-v1", num_workers=0, seed=5, rollout_fragment_length=256)
    sampler = WorkerSet(config, spec.policy_cls)
    batch = sampler.local_worker().sample()
    sampler.stop()
    weights, backends = [], []
    settings: list[dict[str, Any]] = [
        {"num_gpus": 1},
        {"num_learners": learners, "num_cpus_per_learner": 0, "num_gpus_per_learner": gpus},
    ]
    for fields in settings:
        workers = WorkerSet(config.replace(**fields), spec.policy_cls)
        try:
            workers.learner().learn_on_batch(batch, num_sgd_iter=2, sgd_minibatch_size=128)
            weights.append(workers.local_worker().get_policy().get_weights())
            group = workers.learner_group()
            if group is not None:
                backends = flow.get(
                    [
                        learner.apply.remote(
                            lambda w: (
                                w.get_policy().device.type,
                                w.get_policy().update.data_parallel.backend,
                            )
                        )
                        for learner in group.learners()
                    ]
                )
        finally:
            workers.stop()
    assert backends == [("cuda", backend)] * learners
    assert _max_diff(weights[0], weights[1]) < 2e-6


def test_a_killed_learner_is_restarted_and_the_run_goes_on(
    ray_backend: None, tmp_path: Path
) -> None:
    """The restart is counted in results, and a run restored from a later checkpoint goes on
    counting from there (the group of a new process starts at 0; the chaos soak,
    ``benchmarks/soak.py``, found the restored run's results reporting 0)."""
    import ray

    with Trainer("ppo", **{**FIELDS, "num_sgd_iter": 30}) as trainer:
        first = trainer.train()
        group = trainer.workers.learner_group()
        assert group is not None
        victim = group.learners()[1]
        # Killed in the middle of the next update: learner 0 is in a gloo all-reduce then.
        killer = threading.Timer(1.0, ray.kill, args=(victim,))
        killer.start()
        second = trainer.train()
        killer.join()
        third = trainer.train()
        assert group.num_restarts == 1 == third["num_learner_restarts"]
        assert group.learners()[1] != victim
        assert third["num_env_steps_trained"] == first["num_env_steps_trained"] * 3
        assert second["num_env_steps_trained"] == first["num_env_steps_trained"] * 2
        a, b = _learner_weights(trainer)
        published = trainer.workers.local_worker().get_policy().get_weights()
        checkpoint = trainer.save(tmp_path / "checkpoint")
    assert _max_diff(a, b) == 0.0  # the restarted learner took learner 0's state
    assert _max_diff(a, published) == 0.0
    with Trainer.restore(checkpoint, num_sgd_iter=1) as restored:
        fourth = restored.train()
        group = restored.workers.learner_group()
        assert group is not None and group.num_restarts == 0
    assert fourth["num_learner_restarts"] == 1
    assert fourth["counters"]["num_learner_restarts"] == 1


def test_impala_learner_actors_get_references_and_never_the_batches(ray_backend: None) -> None:
    import ray

    from rlflow.data.refs import BatchRefs
    from rlflow.ops.learner_thread import LearnerThread

    seen: list[Any] = []
    original = LearnerThread._take

    def spy(self: LearnerThread) -> Any:
        taken = original(self)
        if taken is not None:
            seen.append(taken[1])
        return taken

    LearnerThread._take = spy  # type: ignore[method-assign]
    try:
        fields = {**FIELDS, "num_workers": 1, "train_batch_size": 200}
        fields.pop("sgd_minibatch_size")
        fields.pop("num_sgd_iter")
        with Trainer("impala", **fields) as trainer:
            result = trainer.train()
            a, b = _learner_weights(trainer)
    finally:
        LearnerThread._take = original  # type: ignore[method-assign]
    assert result["num_env_steps_trained"] > 0
    assert seen and all(isinstance(item, BatchRefs) for item in seen)
    assert all(isinstance(part.ref, ray.ObjectRef) for item in seen for part in item.parts)
    assert _max_diff(a, b) == 0.0


class _Holder:
    """Stores a batch in its own object store (as a rollout worker does), then can die."""

    def store(self, batch: Any) -> Any:
        from rlflow.data.refs import store_batch

        return store_batch(batch)


def test_parts_lost_with_their_worker_are_left_out_by_every_learner(ray_backend: None) -> None:
    import ray

    from rlflow.data.refs import BatchRefs, store_batch

    spec = get_algorithm("ppo")
    config = tuned_config(
        "ppo", "CartPole-v1", num_workers=0, seed=5, rollout_fragment_length=64
    ).replace(num_learners=2, num_cpus_per_learner=0)
    workers = WorkerSet(config, spec.policy_cls)
    try:
        batch = workers.local_worker().sample()
        holder = flow.remote(_Holder).options(num_cpus=0).remote()
        lost = flow.get(holder.store.remote(batch))
        ray.kill(holder)  # its stored batch goes with it (OwnerDiedError on a fetch)
        kept = store_batch(batch)
        stats = workers.learner().learn_on_batch(BatchRefs([lost, kept]))
        assert stats["default_policy"]["total_loss"] > 0  # learned on the part that is left
        assert workers.local_worker().get_policy().update.num_grad_updates == 1
        group = workers.learner_group()
        assert group is not None and group.num_restarts == 0
        refs = [learner.apply.remote(lambda w: w.get_weights()) for learner in group.learners()]
        a, b = (w["default_policy"] for w in flow.get(refs))
    finally:
        workers.stop()
    assert _max_diff(a, b) == 0.0


def test_learner_bundles_join_the_workers_placement_group(ray_backend: None) -> None:
    fields = {**FIELDS, "num_learners": 1, "num_cpus_per_learner": 1, "num_sgd_iter": 1}
    with Trainer("ppo", **fields) as trainer:  # 1 worker + 1 learner: both CPUs reserved
        result = trainer.train()
        group = trainer.workers.placement_group()
        assert group is not None and group.bundle_specs == [{"CPU": 1.0}, {"CPU": 1.0}]
        learner = trainer.workers.learner_group().learners()[0]  # type: ignore[union-attr]
        assert flow.get(learner.ping.remote()) == "ok"
    assert result["num_env_steps_trained"] == 512

"""GPU learner settings: ``num_gpus`` / ``num_gpus_per_worker``, the policy's device, and clear
errors when a GPU is asked for that is not there. The CUDA tests skip without a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from rlflow.algorithms import APPOConfig, DQNConfig, IMPALAConfig, PPOConfig, get_algorithm
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.config.resources import check_gpus, resolve_device
from rlflow.data import BOOTSTRAP, OBS, VF_PREDS
from rlflow.errors import ConfigError
from rlflow.testing.workers import COUNTING_DEFAULTS
from rlflow.workers import RolloutWorker, WorkerSet

pytestmark = pytest.mark.timeout(120)

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
no_cuda = pytest.mark.skipif(CUDA, reason="checks the error given without a GPU")

COUNTING: dict[str, Any] = {
    **COUNTING_DEFAULTS,
    "num_workers": 0,
    "rollout_fragment_length": 8,
    "num_envs_per_worker": 2,
}


def test_the_fields_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"num_gpus=-1 must be a number >= 0"):
        PPOConfig(num_gpus=-1)
    with pytest.raises(ConfigError, match=r"num_gpus_per_worker=-0.5 must be a number >= 0"):
        PPOConfig(num_gpus_per_worker=-0.5)
    assert PPOConfig(num_gpus_per_worker=0.25).worker_bundle() == {"CPU": 1.0, "GPU": 0.25}


def test_the_learner_and_the_workers_pick_their_devices() -> None:
    config = PPOConfig(num_gpus=0.5)
    assert resolve_device(config, 0) == torch.device("cuda")
    assert resolve_device(config, 1) == torch.device("cpu")  # workers act on CPU by default
    config = PPOConfig(num_gpus_per_worker=1)
    assert resolve_device(config, 0) == torch.device("cpu")
    assert resolve_device(config, 2) == torch.device("cuda")
    assert resolve_device(PPOConfig(), 0) == torch.device("cpu")


@no_cuda
def test_a_gpu_that_is_not_there_is_refused_before_any_worker_starts(local_backend: None) -> None:
    with pytest.raises(ConfigError, match=r"PPOConfig: num_gpus=1 but no GPU is visible"):
        WorkerSet(PPOConfig(**COUNTING, num_gpus=1), get_algorithm("ppo").policy_cls)
    config = PPOConfig(**{**COUNTING, "num_workers": 2}, num_gpus_per_worker=0.5)
    with pytest.raises(ConfigError, match=r"num_gpus_per_worker=0.5 x num_workers=2 needs 1"):
        WorkerSet(config, get_algorithm("ppo").policy_cls)


def test_on_ray_the_cluster_must_hold_the_workers_gpus() -> None:
    config = PPOConfig(num_workers=4, num_gpus_per_worker=0.5)
    with pytest.raises(ConfigError, match=r"needs 2 GPUs but the Ray cluster has 1"):
        check_gpus(config, cluster_gpus=1.0)
    check_gpus(config, cluster_gpus=2.0)  # enough


def test_cpu_policies_keep_cpu_checkpoints() -> None:
    worker = RolloutWorker(PPOConfig(**COUNTING), get_algorithm("ppo").policy_cls, worker_index=0)
    policy = worker.get_policy()
    assert policy.device == torch.device("cpu")
    worker.learn_on_batch(worker.sample())
    state = policy.get_state()
    tensors = [v for s in state["optimizer"]["state"].values() for v in s.values()]
    assert tensors and all(t.device.type == "cpu" for t in tensors if torch.is_tensor(t))


@needs_cuda
@pytest.mark.parametrize(
    ("algo", "config_cls", "extra"),
    [
        ("ppo", PPOConfig, {"sgd_minibatch_size": 8, "train_batch_size": 16}),
        ("dqn", DQNConfig, {}),
        ("impala", IMPALAConfig, {"num_workers": 1}),
        ("appo", APPOConfig, {"num_workers": 1}),
    ],
)
def test_a_gpu_learner_trains_and_sends_cpu_weights(
    local_backend: None, algo: str, config_cls: type, extra: dict[str, Any]
) -> None:
    config = config_cls(**{**COUNTING, **extra}, num_gpus=1)
    spec = get_algorithm(algo)
    sampler = RolloutWorker(config_cls(**{**COUNTING, **extra}), spec.policy_cls, worker_index=1)
    learner = RolloutWorker(config, spec.policy_cls, worker_index=0)
    policy = learner.get_policy()
    assert policy.device.type == "cuda"
    assert all(p.device.type == "cuda" for p in policy.model.parameters())
    before = learner.get_weights()[DEFAULT_POLICY_ID]
    stats = learner.learn_on_batch(sampler.sample())[DEFAULT_POLICY_ID]
    assert all(np.isfinite(v) for v in stats.values() if isinstance(v, float)), stats
    after = learner.get_weights()[DEFAULT_POLICY_ID]
    assert all(isinstance(v, np.ndarray) for v in after.values())
    assert any(not np.array_equal(after[k], before[k]) for k in after)
    sampler.set_weights({DEFAULT_POLICY_ID: after})  # a CPU worker takes the GPU's weights
    grads, _ = policy.update.compute_gradients(sampler.sample())
    policy.update.apply_gradients(grads)
    restored = RolloutWorker(config, spec.policy_cls, worker_index=0).get_policy()
    restored.set_state(policy.get_state())
    assert restored.update.num_grad_updates == policy.update.num_grad_updates


@needs_cuda
def test_workers_act_on_the_gpu_and_send_host_arrays(local_backend: None) -> None:
    """``num_gpus_per_worker``: a worker's inference on ``cuda`` (the GPU-tuned Atari configs),
    its samples plain host arrays whose values match a CPU copy of the same weights."""
    gpu_config = IMPALAConfig(**{**COUNTING, "num_workers": 1}, num_gpus_per_worker=0.05)
    spec = get_algorithm("impala")
    worker = RolloutWorker(gpu_config, spec.policy_cls, worker_index=1)
    policy = worker.get_policy()
    assert policy.device.type == "cuda"
    batch = worker.sample()
    assert all(isinstance(v, np.ndarray) for v in batch.values())
    cpu_config = IMPALAConfig(**{**COUNTING, "num_workers": 1})
    cpu = RolloutWorker(cpu_config, spec.policy_cls, worker_index=1)
    cpu.set_weights(worker.get_weights())
    rows = ~batch[BOOTSTRAP]
    _, extra = cpu.get_policy().compute_actions(batch[OBS][rows])
    np.testing.assert_allclose(extra[VF_PREDS], batch[VF_PREDS][rows], atol=1e-4)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_cuda)])
@pytest.mark.parametrize("algo", ["impala", "appo", "ppo"])
def test_a_learner_thread_learns_as_the_worker_through_staging_and_prefetch(
    algo: str, device: str
) -> None:
    """The learner thread (its loader thread staging the next batch, on by default for a GPU and
    asked for on the CPU) gives the losses of the same batches learned on the CPU one by one."""
    from rlflow.ops import dequeue
    from rlflow.ops.learner_thread import LearnerThread

    spec = get_algorithm(algo)
    extra = (
        {"num_workers": 1}
        if algo != "ppo"
        else {"train_batch_size": 16, "sgd_minibatch_size": 8, "num_sgd_iter": 2}
    )
    config_cls = spec.config_cls
    cpu_config = config_cls(**{**COUNTING, **extra, "num_envs_per_worker": 2})
    sampler = RolloutWorker(cpu_config, spec.policy_cls, worker_index=1)
    batches = [sampler.sample() for _ in range(3)]
    cpu = RolloutWorker(cpu_config, spec.policy_cls, worker_index=0)
    if device == "cuda":
        gpu_config = config_cls(**{**COUNTING, **extra, "num_envs_per_worker": 2}, num_gpus=1)
        gpu = RolloutWorker(gpu_config, spec.policy_cls, worker_index=0)
        assert gpu.get_policy().update.staging is not None and gpu.get_policy().update.staging.pin
        learner = LearnerThread(gpu)
        assert learner.prefetch  # on by default for an accelerator
    else:
        learner = LearnerThread(
            RolloutWorker(cpu_config, spec.policy_cls, worker_index=0), prefetch=True
        )
    learner.start()
    try:
        for batch in batches:
            learner.inqueue.put(batch)
        out = dequeue(learner.outqueue, check=learner.check)
        got = [next(out).stats[DEFAULT_POLICY_ID] for _ in batches]
    finally:
        learner.stop()
    want = [cpu.learn_on_batch(b)[DEFAULT_POLICY_ID] for b in batches]
    for g, w in zip(got, want, strict=True):
        for key in ("total_loss", "grad_gnorm"):
            assert g[key] == pytest.approx(w[key], rel=1e-3, abs=1e-5), key

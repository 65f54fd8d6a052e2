"""IMPALA and APPO: configs, the weight broadcast, plan smoke tests, and the learning tier.

Targets: IMPALA and APPO each reach a mean return of 400 on CartPole-v1 within 500k sampled env
steps (2 workers, on Ray with 2 CPUs, seed 0, the shipped tuned configs), each in under about
3 minutes. "Return" is ``episode_return_mean`` over the last 100 finished episodes. Run::

    python -m pytest tests/algorithms/test_learning_impala.py -m learning -s
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rlflow import flow
from rlflow.algorithms import ALGORITHMS, APPOConfig, IMPALAConfig, get_algorithm, tuned_config
from rlflow.algorithms.actor_learner import BroadcastUpdateLearnerWeights, MixInReplay
from rlflow.algorithms.appo.policy import APPOPolicy
from rlflow.algorithms.impala.policy import VTracePolicy
from rlflow.data import SampleBatch
from rlflow.errors import ConfigError, PlanError
from rlflow.flow import ActorItem
from rlflow.ops import LearnerThread, keys
from rlflow.testing.envs import CountingEnv
from rlflow.testing.learning import ASYNC_TARGETS, train_to_target
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(300)


# ------------------------------------------------------------------------------ configs
@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (IMPALAConfig, {"num_workers": 0}, "num_workers=0 must be an integer >= 1"),
        (IMPALAConfig, {"sgd_minibatch_size": 600}, "sgd_minibatch_size=600 must be <= train"),
        (IMPALAConfig, {"vtrace_clip_rho_threshold": 0.0}, "vtrace_clip_rho_threshold=0.0"),
        (IMPALAConfig, {"broadcast_interval": 0}, "broadcast_interval=0 must be an integer >= 1"),
        (IMPALAConfig, {"learner_queue_size": 0}, "learner_queue_size=0"),
        (IMPALAConfig, {"replay_proportion": 0.5}, "needs replay_buffer_num_slots >= 1"),
        (APPOConfig, {"clip_param": 0}, "clip_param=0 must be a number > 0"),
        (APPOConfig, {"target_network_update_freq": -1}, "target_network_update_freq=-1"),
    ],
)
def test_configs_reject_bad_values(cls: type, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        cls(**kwargs)
    assert cls.__name__ in str(info.value)


def test_both_are_registered_with_tuned_configs() -> None:
    assert ALGORITHMS["impala"].policy_cls is VTracePolicy
    assert ALGORITHMS["appo"].policy_cls is APPOPolicy
    assert isinstance(tuned_config("impala", "CartPole-v1"), IMPALAConfig)
    assert isinstance(tuned_config("appo", "CartPole-v1"), APPOConfig)


# ------------------------------------------------------------------------------ broadcast
class _FakeActor:
    """Records ``set_weights.remote`` calls (local backend: ``put`` returns the value)."""

    def __init__(self) -> None:
        self.received: list[Any] = []
        self.versions: list[Any] = []
        self.set_weights = self

    def remote(self, weights: Any, global_vars: Any) -> None:
        self.received.append(flow.get(weights))
        self.versions.append(global_vars["num_grad_updates_per_policy"]["p"])


class _FakeWorker:
    def __init__(self) -> None:
        self.version = 0

    def get_weights(self) -> dict[str, int]:
        return {"version": self.version}

    def weights_snapshot(self) -> dict[str, dict[str, torch.Tensor]]:
        return {"p": {"version": torch.tensor(self.version)}}

    def num_grad_updates_per_policy(self) -> dict[str, int]:
        return {"p": self.version}


class _FakeWorkers:
    def __init__(self) -> None:
        self.worker = _FakeWorker()

    def local_worker(self) -> _FakeWorker:
        return self.worker


def test_broadcast_puts_again_only_when_updated_and_due(local_backend: None) -> None:
    workers = _FakeWorkers()
    learner = LearnerThread(workers.local_worker())  # type: ignore[arg-type]  # never started
    op = BroadcastUpdateLearnerWeights(workers, learner, broadcast_interval=2)  # type: ignore[arg-type]
    actor = _FakeActor()

    def from_actor(i: int) -> ActorItem:
        return ActorItem(actor, i)

    items = flow.from_iterable(range(6)).for_each(from_actor)
    stream = items.for_each(op)
    updates = {1: True, 2: True, 4: False}  # item index -> learner.weights_updated before it

    def step(i: int) -> None:
        if i in updates:
            learner.weights_updated = updates[i]
            workers.worker.version = i
        next(stream)

    for i in range(6):
        step(i)
    # Item 0: first put (v0). Item 1: updated but only 1 item since the put. Item 2: due and
    # updated -> v2. Items 3-5: flag cleared by the put at item 2 (item 4 sets it False).
    assert [int(w["p"]["version"]) for w in actor.received] == [0, 0, 2, 2, 2, 2]
    assert actor.versions == [0, 0, 2, 2, 2, 2]  # each sent with the version read with it
    assert stream.metrics.counters[keys.NUM_WEIGHT_SYNCS] == 2
    assert learner.weights_updated is False


def test_broadcast_rejects_bad_arguments_and_items(local_backend: None) -> None:
    workers = _FakeWorkers()
    learner = LearnerThread(workers.local_worker())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="broadcast_interval=0"):
        BroadcastUpdateLearnerWeights(workers, learner, broadcast_interval=0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must be a LearnerThread"):
        BroadcastUpdateLearnerWeights(workers, object())  # type: ignore[arg-type]
    op = BroadcastUpdateLearnerWeights(workers, learner)  # type: ignore[arg-type]
    with pytest.raises(PlanError, match="zip_with_source_actor"):
        flow.from_iterable([1]).for_each(op).take(1)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ replay
def _tagged(i: int) -> SampleBatch:
    return SampleBatch({"x": [i]})


def test_mix_in_replay_replays_from_the_last_slots_at_the_given_rate() -> None:
    with pytest.raises(ConfigError, match="num_slots=0"):
        MixInReplay(0, 0.5)
    with pytest.raises(ConfigError, match="replay_proportion=-1"):
        MixInReplay(2, -1)
    # A proportion of 2.0 replays exactly 2 batches per input, from the last 2 inputs.
    mix = MixInReplay(2, 2.0, seed=0)
    for i in range(10):
        out = [int(b["x"][0]) for b in mix(_tagged(i)) if isinstance(b, SampleBatch)]
        assert out[0] == i and len(out) == 3
        assert set(out[1:]) <= {i - 1, i} if i else set(out[1:]) == {0}
    # A fraction: that many replayed batches per input on average.
    mix = MixInReplay(4, 0.5, seed=0)
    extra = sum(len(mix(_tagged(i))) - 1 for i in range(2000))
    assert abs(extra / 2000 - 0.5) < 0.05


# ------------------------------------------------------------------------------ smoke tests
SMALL: dict[str, Any] = {
    "env": CountingEnv,
    "env_config": {"episode_len": 5},
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 4,
    "train_batch_size": 16,
    "num_sgd_iter": 2,
    "sgd_minibatch_size": 8,
    "model": {"hidden": (8,)},
    "min_steps_per_iteration": 64,
    "min_time_s_per_iteration": 0.0,  # iterations by steps alone, not IMPALA's 1 s floor
}


@pytest.mark.parametrize("name", ["impala", "appo"])
def test_plan_runs_on_the_local_backend(local_backend: None, name: str) -> None:
    spec = get_algorithm(name)
    extra: dict[str, Any] = {"target_network_update_freq": 32} if name == "appo" else {}
    config = spec.config_cls(**SMALL, **extra)
    workers = WorkerSet(config, spec.policy_cls)
    plan = spec.plan(workers, config)
    results = [next(plan) for _ in range(3)]
    counters = plan.metrics.counters
    assert counters[keys.NUM_ENV_STEPS_TRAINED] > 0
    assert counters[keys.NUM_WEIGHT_SYNCS] > 0
    last = results[-1]
    assert last["episode_return_mean"] == 5.0
    thread = last["info"]["learner_thread"]
    assert thread["num_batches"] > 0 and "inqueue_size_mean" in thread
    # num_sgd_iter=2 over minibatches of 8 in batches of 16: 4 SGD steps per batch.
    assert last["info"]["learner"]["default_policy"]["num_steps"] == 4.0
    if name == "appo":
        assert counters[keys.NUM_TARGET_UPDATES] >= 1
    workers.stop()


def test_impala_plan_trains_on_replayed_batches_too(local_backend: None) -> None:
    config = IMPALAConfig(
        **SMALL, replay_proportion=1.0, replay_buffer_num_slots=4, learner_queue_size=1
    )
    workers = WorkerSet(config, VTracePolicy)
    plan = get_algorithm("impala").plan(workers, config)
    plan.take(10)
    counters = plan.metrics.counters
    # One replayed worker batch per sampled one: about twice as many steps trained as sampled,
    # minus the few batches still in the learner's queues (without replay: never more).
    trained, sampled = counters[keys.NUM_ENV_STEPS_TRAINED], counters[keys.NUM_ENV_STEPS_SAMPLED]
    assert trained > 1.3 * sampled, (trained, sampled)
    workers.stop()


# ------------------------------------------------------------------------------ learning


@pytest.mark.learning
@pytest.mark.ray
@pytest.mark.timeout(1200)  # seed 0 took 75-179 s with a CPU hog; a miss and seed 1: ~15 min
@pytest.mark.parametrize("algo", ["impala", "appo"])
def test_learns_cartpole_on_ray(ray_backend: None, algo: str) -> None:
    """Seed 0 reaches the target within the budget, or else seed 1 does.

    An async run's curve depends on timing as well as on the seed. With a CPU hog, IMPALA seed 0
    reached 400 at 88k env steps in one run and missed it (best 281 at 500k) in another on the
    same code (2026-11-23); seeds 0-9 took 59k-175k earlier (benchmarks/async_learning.py). A
    broken learner misses on both seeds; a run that lost a seed to timing does not fail CI."""
    target, budget = ASYNC_TARGETS[algo]
    outcomes = [train_to_target(algo, target, budget, seed=0)]
    if outcomes[0].best < target:
        outcomes.append(train_to_target(algo, target, budget, seed=1))
    last = outcomes[-1]
    assert last.best >= target and last.steps <= budget, outcomes

"""Learner-side operators shared by several plans.

- :func:`impala_train_op`: IMPALA's actor-learner dataflow up to the metrics, with
  :class:`MixInReplay` (IMPALA's replay of whole worker batches) and
  :class:`BroadcastUpdateLearnerWeights`; IMPALA's and APPO's plans use it.
- :class:`UpdateKL`: adapt the KL coefficient of every policy that has one, after a train step
  (PPO's plan and ppo_dqn's PPO branch).

The plans pass their config; :class:`ActorLearnerConfig` names the fields
:func:`impala_train_op` reads (this layer sits below the algorithms and never imports them).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol

from rlflow import flow
from rlflow.checks import check_int, check_number
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError, PlanError
from rlflow.flow import ActorItem, LocalIterator
from rlflow.ops import keys
from rlflow.ops.concurrency import Enqueue, concurrently, dequeue
from rlflow.ops.learner_thread import LearnerThread, LearnerWeights, RecordStepsTrained
from rlflow.ops.rollout import ConcatBatches, parallel_rollouts
from rlflow.ops.train import TrainResult
from rlflow.replay import register_replay_buffer
from rlflow.workers import WorkerSet

__all__ = [
    "ActorLearnerConfig",
    "BroadcastUpdateLearnerWeights",
    "MixInReplay",
    "UpdateKL",
    "impala_train_op",
]


class ActorLearnerConfig(Protocol):
    """The config fields :func:`impala_train_op` reads (`IMPALAConfig` has them all)."""

    @property
    def train_batch_size(self) -> int: ...
    @property
    def num_sgd_iter(self) -> int: ...
    @property
    def sgd_minibatch_size(self) -> int: ...
    @property
    def learner_queue_size(self) -> int: ...
    @property
    def max_sample_requests_in_flight_per_worker(self) -> int: ...
    @property
    def broadcast_interval(self) -> int: ...
    @property
    def replay_proportion(self) -> float: ...
    @property
    def replay_buffer_num_slots(self) -> int: ...
    @property
    def policies_to_train(self) -> Sequence[str] | None: ...
    @property
    def seed(self) -> int | None: ...


def impala_train_op(workers: WorkerSet, config: ActorLearnerConfig) -> LocalIterator[TrainResult]:
    """IMPALA's dataflow up to the metrics: one ``TrainResult`` per batch the learner trained.

    Used by IMPALA's and APPO's plans::

        enqueue_op: (1) parallel_rollouts(async) -> (2) MixInReplay(replay_proportion)
                    -> ConcatBatches(train_batch_size)
                    -> (3) Enqueue(learner.inqueue)       [LearnerThread: num_sgd_iter passes]
                    -> (4) BroadcastUpdateLearnerWeights  [to the worker that sampled last]
        dequeue_op: (5) dequeue(learner.outqueue) -> (6) RecordStepsTrained
        (7) concurrently(enqueue_op, dequeue_op; async, output of dequeue_op)

    Starts a :class:`~rlflow.ops.LearnerThread` on the local worker now.
    """
    learner = LearnerThread(
        workers.local_worker(),
        inqueue_size=config.learner_queue_size,
        num_sgd_iter=config.num_sgd_iter,
        sgd_minibatch_size=config.sgd_minibatch_size,
        policies=config.policies_to_train,
    )
    learner.start()
    in_flight = config.max_sample_requests_in_flight_per_worker
    mix_in = MixInReplay(config.replay_buffer_num_slots, config.replay_proportion, seed=config.seed)
    register_replay_buffer(workers, "mix_in_replay", mix_in)  # checkpoint_replay_buffers
    enqueue_op = (
        # (1) Each worker's batches as they arrive; (2) with replayed ones mixed in (none when
        # replay_proportion is 0), whole batches up to train_batch_size.
        parallel_rollouts(workers, mode="async", num_async=in_flight)
        .combine(mix_in)
        .combine(ConcatBatches(config.train_batch_size))
        # (3) To the learner thread; a full queue pauses sampling (backpressure).
        .for_each(Enqueue(learner.inqueue))
        # (4) The learner's latest weights to the worker whose batch came last.
        .zip_with_source_actor()
        .for_each(BroadcastUpdateLearnerWeights(workers, learner, config.broadcast_interval))
    )
    # (5) What the learner trained (its crash is raised here); (6) counted in the plan.
    dequeue_op = dequeue(learner.outqueue, check=learner.check).for_each(
        RecordStepsTrained(learner=learner)
    )
    # (7) Both run as their inputs are ready; the stream follows the learner.
    return concurrently([enqueue_op, dequeue_op], mode="async", output_indexes=[1])


class BroadcastUpdateLearnerWeights:
    """Send the learner thread's latest weights to the worker that delivered the last batch.

    Items: ``ActorItem(worker, batch) -> the same item`` (use with ``.for_each`` after
    ``zip_with_source_actor()``). Every item pushes the cached weights to its worker
    (fire-and-forget ``set_weights`` with ``{"timestep": env steps sampled,
    "num_grad_updates_per_policy": the weights' versions}``). The cache is
    refreshed (``get_weights`` under the learner's lock, then ``put``) on the first item and
    afterwards only when the learner updated since the last refresh and at least
    ``broadcast_interval`` items passed. Side effects: counter ``num_weight_syncs`` (one per
    ``put``); timer ``update``; clears ``learner.weights_updated``.
    """

    def __init__(
        self, workers: WorkerSet, learner: LearnerThread, broadcast_interval: int = 1
    ) -> None:
        """Validate ``learner`` and ``broadcast_interval`` (an int >= 1)."""
        if not isinstance(learner, LearnerThread):
            raise ConfigError(
                f"BroadcastUpdateLearnerWeights(learner={learner!r}) must be a LearnerThread"
            )
        self.workers = workers
        self.learner = learner
        self.broadcast_interval = check_int(
            broadcast_interval, "BroadcastUpdateLearnerWeights: broadcast_interval", low=1
        )
        self._since_put = 0
        self._weights = LearnerWeights(workers, learner)

    def __call__(self, item: ActorItem) -> ActorItem:
        if not isinstance(item, ActorItem):
            raise PlanError(
                "BroadcastUpdateLearnerWeights takes ActorItem(worker, batch) items (use "
                f"zip_with_source_actor() first), got {item!r}"
            )
        ctx = flow.current_metrics()
        self._since_put += 1
        with ctx.timers[keys.UPDATE_TIMER].timing():
            first = self._weights.ref is None
            if first or (self._since_put >= self.broadcast_interval and self._weights.changed):
                self._weights.refresh()
                self._since_put = 0
                ctx.counters[keys.NUM_WEIGHT_SYNCS] += 1
            self._weights.send(item.actor)
        return item


class MixInReplay:
    """Keep recent batches in a ring and mix replayed ones into the stream (IMPALA's replay).

    Items: ``SampleBatch -> list[SampleBatch]``: the input, then ``k`` batches drawn uniformly
    from the ring (the input included), where ``k`` is random with mean ``replay_proportion``
    (``p`` = the proportion; while ``random() < p``: one more, ``p -= 1``). Use with
    ``.combine``. Side effects: the ring of the last ``num_slots`` inputs (oldest replaced
    first). ``replay_proportion=0`` passes every batch through alone and stores nothing.

    >>> from rlflow import flow
    >>> batches = [SampleBatch({"x": [i]}) for i in range(3)]
    >>> out = flow.from_iterable(batches).combine(MixInReplay(2, 0.0)).take(3)
    >>> [b["x"].tolist() for b in out]
    [[0], [1], [2]]
    """

    def __init__(
        self, num_slots: int, replay_proportion: float, *, seed: int | None = None
    ) -> None:
        """Validate: ``num_slots`` an int >= 0 (> 0 when replaying), proportion >= 0."""
        check_int(num_slots, "MixInReplay: num_slots", low=0)
        check_number(replay_proportion, "MixInReplay: replay_proportion", low=0.0)
        if replay_proportion > 0 and num_slots == 0:
            raise ConfigError(
                f"MixInReplay(num_slots=0, replay_proportion={replay_proportion!r}): replaying "
                "needs a ring of at least 1 slot; set num_slots >= 1"
            )
        self.num_slots = num_slots
        self.replay_proportion = float(replay_proportion)
        self._ring: list[SampleBatch | MultiAgentBatch] = []
        self._next_slot = 0
        self._rng = random.Random(seed)

    def __call__(self, batch: SampleBatch | MultiAgentBatch) -> list[SampleBatch | MultiAgentBatch]:
        if self.replay_proportion == 0:
            return [batch]
        if len(self._ring) < self.num_slots:
            self._ring.append(batch)
        else:
            self._ring[self._next_slot] = batch
            self._next_slot = (self._next_slot + 1) % self.num_slots
        out = [batch]
        p = self.replay_proportion
        while self._rng.random() < p:
            p -= 1.0
            out.append(self._rng.choice(self._ring))
        return out

    def get_state(self) -> dict[str, Any]:
        """The ring (batches by reference), its next slot and the RNG state, for checkpoints."""
        return {"ring": list(self._ring), "next_slot": self._next_slot, "rng": self._rng.getstate()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`get_state` output (the ring cut to ``num_slots``)."""
        self._ring = list(state["ring"])[: self.num_slots]
        self._next_slot = int(state["next_slot"]) % max(self.num_slots, 1)
        self._rng.setstate(state["rng"])


class UpdateKL:
    """Adapt each policy's KL coefficient to the mean KL of the last train step.

    Items: ``TrainResult -> TrainResult`` (unchanged). Use with ``.for_each`` after
    ``TrainOneStep``. Every policy of the result whose stats have ``kl`` and that has an
    ``update_kl`` method (PPO's) adapts; others are left alone. Side effects: ``kl_coeff`` of
    the learner's policies (only the learner computes the loss, so workers need not know it);
    the new value as ``stats["kl_coeff"]`` (``info["learner"][pid]``).
    """

    def __init__(self, workers: WorkerSet) -> None:
        """Keep the worker set (its local worker holds the policies)."""
        self.workers = workers

    def __call__(self, result: TrainResult) -> TrainResult:
        for pid, stats in result.stats.items():
            policy = self.workers.local_worker().get_policy(pid)
            update = getattr(policy, "update_kl", None)
            if update is not None and "kl" in stats:
                stats["kl_coeff"] = update(stats["kl"])
        return result

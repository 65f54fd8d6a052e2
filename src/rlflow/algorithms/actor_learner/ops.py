"""The learner-side operators of IMPALA's dataflow, which APPO runs too.

- :class:`MixInReplay`: IMPALA's replay of whole worker batches, mixed into the sampled stream;
- :class:`BroadcastUpdateLearnerWeights`: the learner thread's latest weights to the worker
  whose batch came last.

Both are stages of :func:`rlflow.algorithms.impala.plan.impala_train_op`.
"""

from __future__ import annotations

import random
from typing import Any

from rlflow import flow
from rlflow.checks import check_int, check_number
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.data.refs import BatchRef
from rlflow.errors import ConfigError, PlanError
from rlflow.flow import ActorItem
from rlflow.ops import keys
from rlflow.ops.learner_thread import LearnerThread, LearnerWeights
from rlflow.workers import WorkerSet

__all__ = ["BroadcastUpdateLearnerWeights", "MixInReplay"]


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
        self._ring: list[SampleBatch | MultiAgentBatch | BatchRef] = []
        self._next_slot = 0
        self._rng = random.Random(seed)

    def __call__(self, batch: Any) -> list[Any]:
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
        """The ring, its next slot and the RNG state, for checkpoints (batch references,
        `rlflow.data.refs.BatchRef`, are fetched: a checkpoint holds the data)."""
        ring = [b.resolve() if isinstance(b, BatchRef) else b for b in self._ring]
        return {"ring": ring, "next_slot": self._next_slot, "rng": self._rng.getstate()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`get_state` output (the ring cut to ``num_slots``)."""
        self._ring = list(state["ring"])[: self.num_slots]
        self._next_slot = int(state["next_slot"]) % max(self.num_slots, 1)
        self._rng.setstate(state["rng"])

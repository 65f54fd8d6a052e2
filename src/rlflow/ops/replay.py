"""Replay operators: store experience, replay it, feed TD errors back, update target networks.

- :class:`StoreToReplayBuffer` (stage): add each batch to a local buffer or a random replay
  shard; pass the batch on.
- :func:`replay` (source): batches sampled from a local buffer, or from replay shards as they
  arrive; nothing below ``learning_starts``.
- :class:`UpdateReplayPriorities` (stage): |TD error| priorities back to the buffer or shard
  the batch came from.
- :class:`UpdateTargetNetwork` (stage): copy Q weights to the target network every ``freq``
  steps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from rlflow import flow
from rlflow.checks import check_int, check_number
from rlflow.data.refs import BatchRef, store_batch
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch, from_multi_agent_if_single
from rlflow.errors import ActorDiedError, ConfigError, ObjectLostError, PlanError
from rlflow.flow import NOT_READY, ActorItem, LocalIterator
from rlflow.ops import keys
from rlflow.ops.concurrency import _Forever
from rlflow.ops.replay_recovery import replace_shard_in_plan, replay_shard_recovery
from rlflow.ops.rollout import _check_batch, _policy_id_list
from rlflow.ops.train import TrainResult
from rlflow.replay import (
    BATCH_INDEXES,
    MultiAgentReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
)
from rlflow.replay.shards import ReplayShardTable, as_shard_table
from rlflow.schedules import LinearSchedule
from rlflow.workers import WorkerSet

AnyBuffer = ReplayBuffer | MultiAgentReplayBuffer
"""A local buffer: one policy's, or one per policy."""

__all__ = [
    "StoreToReplayBuffer",
    "UpdateReplayPriorities",
    "UpdateTargetNetwork",
    "replay",
]

logger = logging.getLogger(__name__)

Batch = SampleBatch | MultiAgentBatch
Shards = ReplayShardTable | Sequence[Any]
"""Replay shards: a table (a dead shard is started again) or a plain list of actors (not)."""

_MAX_ADDS_IN_FLIGHT = 16
"""Unanswered ``add_batch`` calls to replay shards before StoreToReplayBuffer waits."""


def _one_target(local_buffer: Any, actors: Any, where: str) -> ReplayShardTable | None:
    """Check that exactly one of ``local_buffer`` / ``actors`` is given; return the shards."""
    if (local_buffer is None) == (actors is None):
        raise ConfigError(
            f"{where}: give exactly one of local_buffer= (a ReplayBuffer in this process) or "
            "actors= (replay shard actors), got "
            f"{'both' if local_buffer is not None else 'neither'}"
        )
    if local_buffer is not None:
        if not isinstance(local_buffer, ReplayBuffer | MultiAgentReplayBuffer):
            raise ConfigError(
                f"{where}(local_buffer={local_buffer!r}) must be a ReplayBuffer, "
                "PrioritizedReplayBuffer or MultiAgentReplayBuffer"
            )
        return None
    if not isinstance(actors, ReplayShardTable) and not list(actors):
        raise ConfigError(f"{where}(actors=[]) needs at least one replay shard")
    return as_shard_table(actors)


def _as_single(batch: Batch, where: str) -> SampleBatch:
    single = from_multi_agent_if_single(batch)
    if not isinstance(single, SampleBatch):
        raise PlanError(
            f"{where}: a replay buffer stores one policy's experience, got {batch!r}; select "
            "one policy first (SelectExperiences) and use one buffer per policy"
        )
    return single


class StoreToReplayBuffer:
    """Add each batch to a replay buffer: a local one, or a random replay shard.

    Items: ``SampleBatch | MultiAgentBatch -> the same batch``. Use with ``.for_each`` after a
    rollout source. Exactly one of ``local_buffer`` (stored now, in this process) or ``actors``
    (replay shards with ``add_batch``; one shard per batch, drawn by a RNG seeded with
    ``seed``; the call does not wait for the shard) must be given. At most 16 ``add_batch``
    calls are unanswered at a time (the 17th waits for the oldest), and a shard's error is
    raised here on a later batch. When an add finds its shard dead, its rows are lost and a
    `ReplayShardTable` starts the shard again (counter ``num_replay_shard_restarts``); with a
    plain list of actors the death is raised, naming "replay shard k of N". Side effect:
    counter ``num_env_steps_stored``. A batch passed by reference (a `BatchRef`) whose rollout
    worker died before the shard read it is lost (a warning; its rows stay counted as stored).

    >>> from rlflow import flow
    >>> from rlflow.replay import ReplayBuffer
    >>> buf = ReplayBuffer(100, seed=0)
    >>> batches = [SampleBatch({"x": [1, 2]}), SampleBatch({"x": [3]})]
    >>> len(flow.from_iterable(batches).for_each(StoreToReplayBuffer(local_buffer=buf)).take(2))
    2
    >>> len(buf)
    3
    """

    def __init__(
        self,
        *,
        local_buffer: AnyBuffer | None = None,
        actors: Shards | None = None,
        seed: int | None = 0,
    ) -> None:
        """Validate the target (exactly one of ``local_buffer`` / ``actors``)."""
        self.shards = _one_target(local_buffer, actors, "StoreToReplayBuffer")
        self.actors = None if self.shards is None else self.shards.actors
        self.local_buffer = local_buffer
        self._rng = np.random.default_rng(seed)
        self._pending: list[tuple[Any, int, Any, int]] = []  # (ref, shard index, actor, rows)

    def _check_pending(self) -> None:
        """Raise a shard's error, if one came back; wait while too many adds are unanswered."""
        if not self._pending:
            return
        refs = [p[0] for p in self._pending]
        _, waiting = flow.wait(refs, num_returns=len(refs), timeout=0)
        still = {id(ref) for ref in waiting}
        ready = [p for p in self._pending if id(p[0]) not in still]
        self._pending = [p for p in self._pending if id(p[0]) in still]
        for pending in ready:
            self._settle(*pending)
        while len(self._pending) >= _MAX_ADDS_IN_FLIGHT:
            self._settle(*self._pending.pop(0))

    def _settle(self, ref: Any, index: int, actor: Any, rows: int) -> None:
        """Wait for one add; a dead shard is started again (its rows are lost)."""
        assert self.shards is not None
        try:
            flow.get(ref)
        except ActorDiedError as err:
            replace_shard_in_plan(self.shards, index, dead=actor, error=err)
            logger.warning("%s died: %d rows stored to it lost", self.shards.label(index), rows)
        except ObjectLostError as err:  # a batch by reference whose rollout worker died
            logger.warning(
                "a batch of %d rows for %s was lost before it was stored (%s)",
                rows,
                self.shards.label(index),
                err,
            )

    def __call__(self, batch: Batch | BatchRef) -> Any:
        if isinstance(batch, BatchRef):
            if self.shards is not None:  # the shard fetches the batch from the worker
                return self._store_in_shard(batch, batch.ref)
            batch = batch.resolve()
        _check_batch(batch, "StoreToReplayBuffer")
        if isinstance(self.local_buffer, MultiAgentReplayBuffer):
            self.local_buffer.add(batch)
        elif self.local_buffer is not None:
            self.local_buffer.add(_as_single(batch, "StoreToReplayBuffer"))
        else:
            return self._store_in_shard(batch, batch)
        flow.current_metrics().counters[keys.NUM_ENV_STEPS_STORED] += batch.env_steps()
        return batch

    def _store_in_shard(self, item: Any, payload: Any) -> Any:
        """``add_batch(payload)`` on a random shard (a reference is resolved there)."""
        assert self.shards is not None
        self._check_pending()
        index = int(self._rng.integers(len(self.shards)))
        actor = self.shards.actors[index]
        self._pending.append((actor.add_batch.remote(payload), index, actor, item.count))
        flow.current_metrics().counters[keys.NUM_ENV_STEPS_STORED] += item.env_steps()
        return item


class _ReplayLocal:
    """``for_each`` function of :func:`replay` on a local buffer."""

    def __init__(
        self,
        buffer: AnyBuffer,
        num_items: int,
        learning_starts: int,
        beta: float | LinearSchedule | None,
    ) -> None:
        self.buffer = buffer
        # A buffer whose items hold several env steps (`SequenceReplayBuffer`: sequences)
        # counts num_items and learning_starts in env steps, as a buffer of transitions does.
        per_item = int(getattr(buffer, "steps_per_item", 1))
        self.num_items = max(1, num_items // per_item)
        self.starts = max(1, -(-learning_starts // per_item))
        self.beta = beta

    def __call__(self, _tick: None) -> SampleBatch | Any:
        if len(self.buffer) < self.starts:
            return NOT_READY
        ctx = flow.current_metrics()
        if isinstance(self.buffer, PrioritizedReplayBuffer | MultiAgentReplayBuffer):
            beta = self.beta
            if isinstance(beta, LinearSchedule):
                beta = beta.value(ctx.counters[keys.NUM_ENV_STEPS_SAMPLED])
            batch = self.buffer.sample(self.num_items, beta=beta)
        else:
            batch = self.buffer.sample(self.num_items)
        ctx.counters[keys.NUM_ENV_STEPS_REPLAYED] += batch.env_steps()
        return batch


def _store_unless_none(batch: SampleBatch | None) -> BatchRef | None:
    """On a replay shard: its replayed batch into its object store (None: none yet)."""
    return None if batch is None else store_batch(batch)


def _none_to_not_ready(items: Iterator[Any]) -> Iterator[Any]:
    """A shard's None ("below learning_starts") becomes NOT_READY, so a union moves on instead
    of pulling Nones in a loop (a local shard answers at once, forever)."""
    for item in items:
        yield NOT_READY if item is None else item


def _count_replayed(batch: SampleBatch) -> SampleBatch:
    flow.current_metrics().counters[keys.NUM_ENV_STEPS_REPLAYED] += batch.env_steps()
    return batch


def replay(
    *,
    local_buffer: AnyBuffer | None = None,
    actors: Shards | None = None,
    num_async: int = 4,
    num_items: int = 32,
    learning_starts: int = 0,
    beta: float | LinearSchedule | None = None,
    by_reference: bool = False,
) -> LocalIterator[SampleBatch]:
    """Source of replayed batches, from a local buffer or from replay shards; lazy, endless.

    Items: ``SampleBatch`` with ``batch_indexes`` (and ``weights`` when prioritized).

    - ``local_buffer``: each read samples ``num_items`` rows (a buffer of sequences,
      `rlflow.replay.SequenceReplayBuffer`: ``num_items`` env steps' worth of
      sequences, and ``learning_starts`` counted in env steps too; prioritized buffers with
      importance exponent ``beta``: a number, a :class:`~rlflow.replay.LinearSchedule` over env
      steps sampled, or None for the buffer's own). While the buffer holds fewer than
      ``max(learning_starts, 1)`` rows the stream gives ``NOT_READY``: inside
      :func:`~rlflow.ops.concurrently` the other ops run meanwhile; read alone, the reader waits
      with back-off (it never spins). How often to replay per stored batch (training
      intensity) is the round-robin weight of the replay op in
      :func:`~rlflow.ops.concurrently` (see
      `rlflow.algorithms.q_learning.replay.training_intensity_weights`).
    - ``actors``: replay shards (``ReplayActor``; batch size and ``learning_starts`` are theirs),
      read with ``gather_async(num_async)``; a shard's None (below its ``learning_starts``)
      becomes ``NOT_READY``, so a concurrent union runs its other ops meanwhile;
      ``current_actor`` is the shard each batch came from. A shard of a `ReplayShardTable`
      that dies is started again empty and read in its place (counter
      ``num_replay_shard_restarts``); of a plain list, its death ends the read. With
      ``by_reference`` each shard keeps its batch in its object store and the items are
      `rlflow.data.refs.BatchRef` (for learner actors: Ape-X's shards feed them directly).

    Side effect: counter ``num_env_steps_replayed``.

    >>> from rlflow import flow
    >>> from rlflow.replay import ReplayBuffer
    >>> buf = ReplayBuffer(10, seed=0)
    >>> buf.add(SampleBatch({"x": [1, 2, 3]}))
    >>> [b.count for b in replay(local_buffer=buf, num_items=4, learning_starts=2).take(2)]
    [4, 4]
    """
    handles = _one_target(local_buffer, actors, "replay")
    check_int(num_async, "replay: num_async", low=1)
    check_int(num_items, "replay: num_items", low=1)
    check_int(learning_starts, "replay: learning_starts", low=0)
    if not (beta is None or isinstance(beta, LinearSchedule)):
        check_number(beta, "replay: beta (or a LinearSchedule, or None)", low=0, high=1)
    if local_buffer is not None:
        ticks = flow.from_iterable(_Forever(), name="replay(local_buffer)")
        return ticks.for_each(_ReplayLocal(local_buffer, num_items, learning_starts, beta))
    assert handles is not None
    recovery = replay_shard_recovery(handles)
    name = f"replay_shards[{len(handles)}]"
    shards = flow.from_actors(list(handles.actors), name=name, recovery=recovery)
    if by_reference:
        shards = shards.for_each(_store_unless_none)
    replies = shards.gather_async(num_async=num_async).transform(_none_to_not_ready)
    return replies.for_each(_count_replayed)


class UpdateReplayPriorities:
    """Set the priorities of replayed rows to their |TD error| + ``epsilon``.

    Items: ``TrainResult`` (or ``ActorItem(shard, TrainResult)``, e.g. from a
    :class:`~rlflow.ops.LearnerThread`) ``-> the same item``. Use with ``.for_each`` after the
    train stage of a replayed batch. Each policy's stats must hold ``td_error`` (per row) and
    ``batch_indexes`` (the replayed rows), as :class:`~rlflow.algorithms.dqn.DQNPolicy` returns
    them; both are *removed* from the stats (arrays do not belong in results). The priorities go to
    ``local_buffer`` when given (ignored unless it is prioritized), else to the replay shard
    the batch came from: the item's actor, or ``current_actor`` (set by ``replay(actors=...)``),
    fire-and-forget. With ``actors`` (the shards given to ``replay``), updates for a shard
    replaced since it replayed the batch are dropped: its rows are gone (those of a dead shard
    not yet replaced are lost with it). Stats without TD errors are left alone.
    """

    def __init__(
        self,
        *,
        local_buffer: AnyBuffer | None = None,
        actors: Shards | None = None,
        epsilon: float = 1e-6,
    ) -> None:
        """Validate ``epsilon`` (> 0) and the buffer."""
        if local_buffer is not None and not isinstance(
            local_buffer, ReplayBuffer | MultiAgentReplayBuffer
        ):
            raise ConfigError(
                f"UpdateReplayPriorities(local_buffer={local_buffer!r}) must be a ReplayBuffer"
            )
        self.local_buffer = local_buffer
        self.shards = None if actors is None else as_shard_table(actors)
        self.epsilon = check_number(
            epsilon, "UpdateReplayPriorities: epsilon", low=0, low_open=True
        )

    def __call__(self, item: Any) -> Any:
        actor = item.actor if isinstance(item, ActorItem) else None
        result = item.item if isinstance(item, ActorItem) else item
        if not isinstance(result, TrainResult):
            raise PlanError(
                "UpdateReplayPriorities takes TrainResult items (or ActorItem of one), got "
                f"{item!r}"
            )
        for pid, stats in result.stats.items():
            td_error = stats.pop(keys.TD_ERROR, None)
            indexes = stats.pop(BATCH_INDEXES, None)
            if td_error is None or indexes is None:
                continue
            priorities = np.abs(np.asarray(td_error, dtype=np.float64)) + self.epsilon
            if isinstance(self.local_buffer, MultiAgentReplayBuffer):
                self.local_buffer.update_priorities(indexes, priorities, policy_id=pid)
                continue
            if self.local_buffer is not None:
                if isinstance(self.local_buffer, PrioritizedReplayBuffer):
                    self.local_buffer.update_priorities(indexes, priorities)
                continue
            target = actor if actor is not None else flow.current_metrics().current_actor
            if target is None:
                raise PlanError(
                    "UpdateReplayPriorities: no replay shard is known for this result; give "
                    "local_buffer=, or use it after replay(actors=...) or with ActorItem items"
                )
            if self.shards is None or self.shards.index_of(target) is not None:
                target.update_priorities.remote(indexes, priorities)
        return item


class UpdateTargetNetwork:
    """Copy each policy's Q weights into its target network every ``freq`` env steps.

    Items: any ``T -> T`` (unchanged). Use with ``.for_each`` after the train stage. Reads
    counter ``num_env_steps_sampled`` (or ``num_env_steps_trained`` with
    ``by_steps_trained``); once it grew by at least ``freq`` since the last update (``freq=0``:
    after every item), calls ``update_target()`` on the learner's policies (all, or
    ``policies``) that have one. Side effects: the target networks; counters
    ``num_target_updates`` and ``last_target_update_ts``.
    """

    def __init__(
        self,
        workers: WorkerSet,
        freq: int,
        *,
        by_steps_trained: bool = False,
        policies: Sequence[str] | None = None,
    ) -> None:
        """Validate ``freq`` (an int >= 0) and the policy ids."""
        self.workers = workers
        self.freq = check_int(freq, "UpdateTargetNetwork: freq", low=0)
        self.counter = (
            keys.NUM_ENV_STEPS_TRAINED if by_steps_trained else keys.NUM_ENV_STEPS_SAMPLED
        )
        known = workers.local_worker().policy_map
        ids = list(known) if policies is None else _policy_id_list(policies, "UpdateTargetNetwork")
        for pid in ids:
            if pid not in known:
                raise ConfigError(
                    f"UpdateTargetNetwork: unknown policy {pid!r}; known: {sorted(known)}"
                )
        self.policies = [pid for pid in ids if hasattr(known[pid], "update_target")]
        if policies is not None and len(self.policies) < len(ids):
            missing = sorted(set(ids) - set(self.policies))
            raise ConfigError(
                f"UpdateTargetNetwork: policies {missing} have no update_target() (no target "
                "network)"
            )

    def __call__(self, item: Any) -> Any:
        counters = flow.current_metrics().counters
        current = counters[self.counter]
        if current - counters[keys.LAST_TARGET_UPDATE_TS] >= self.freq:
            local, group = self.workers.local_worker(), self.workers.learner_group()
            for pid in self.policies:
                local.get_policy(pid).update_target()  # type: ignore[attr-defined]
                if group is not None:  # the learner actors' targets feed their losses
                    group.foreach_policy(pid, "update_target")
            counters[keys.NUM_TARGET_UPDATES] += 1
            counters[keys.LAST_TARGET_UPDATE_TS] = current
        return item

"""Rollout operators: experience sources and per-batch transforms of experience.

Sources (snake_case) build a stream from the rollout workers: :func:`parallel_rollouts`,
:func:`async_gradients`. Stages (PascalCase) go into ``for_each``/``combine``:
:class:`ConcatBatches`, :class:`SelectExperiences`, :class:`StandardizeFields`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal, overload

import numpy as np

from rlflow import flow
from rlflow.checks import check_int
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.data.refs import BatchRef, BatchRefs, store_batch
from rlflow.errors import ConfigError, ConfigTypeError, PlanError
from rlflow.ops import keys
from rlflow.ops.recovery import rollout_recovery
from rlflow.workers import Gradients, WorkerSet, current_worker

__all__ = [
    "ConcatBatches",
    "SelectExperiences",
    "StandardizeFields",
    "async_gradients",
    "parallel_rollouts",
]

logger = logging.getLogger(__name__)

Batch = SampleBatch | MultiAgentBatch
RolloutMode = Literal["bulk_sync", "async", "raw"]
_MODES = ("bulk_sync", "async", "raw")


def _check_batch(item: Any, where: str) -> Batch:
    if not isinstance(item, SampleBatch | MultiAgentBatch):
        raise PlanError(f"{where} takes SampleBatch or MultiAgentBatch items, got {item!r}")
    return item


def count_sampled(batch: Batch) -> Batch:
    """Add a batch's env and agent steps to the sampled counters; pass it on."""
    counters = flow.current_metrics().counters
    counters[keys.NUM_ENV_STEPS_SAMPLED] += batch.env_steps()
    counters[keys.NUM_AGENT_STEPS_SAMPLED] += batch.agent_steps()
    return batch


def _count_late(num_late: int) -> None:
    """A bulk-sync round closed at ``sample_timeout_s`` without ``num_late`` workers' batches."""
    flow.current_metrics().counters[keys.NUM_LATE_SAMPLES] += num_late


def _concat_round(batches: list[Any]) -> Batch | BatchRefs:
    """One bulk-sync round (a list, one batch per worker) as one batch (of references, when
    the workers sent `BatchRef`)."""
    if batches and all(isinstance(b, BatchRef) for b in batches):
        return BatchRefs(batches)
    out: Batch = SampleBatch.concat_samples(batches)
    return out


def _worker_shards(workers: WorkerSet) -> flow.ParallelIterator[Any]:
    """The remote workers as shards; a dead one is recreated (see ``rlflow.ops.recovery``)."""
    remote = workers.remote_workers()
    name = f"rollout_workers[1..{len(remote)}]"
    return flow.from_actors(remote, name=name, recovery=rollout_recovery(workers))


class _LocalSamples:
    """Sample forever on the local worker (no remote workers)."""

    def __init__(self, workers: WorkerSet) -> None:
        self.workers = workers

    def __iter__(self) -> Iterator[Batch]:
        worker = self.workers.local_worker()
        while True:
            yield worker.sample()


@overload
def parallel_rollouts(
    workers: WorkerSet,
    *,
    mode: Literal["raw"],
    num_async: int = 1,
    ahead: bool = False,
    by_reference: bool = False,
) -> flow.ParallelIterator[Batch]: ...


@overload
def parallel_rollouts(
    workers: WorkerSet,
    *,
    mode: Literal["bulk_sync", "async"] = "bulk_sync",
    num_async: int = 1,
    ahead: bool = False,
    by_reference: bool = False,
) -> flow.LocalIterator[Batch]: ...


def parallel_rollouts(
    workers: WorkerSet,
    *,
    mode: str = "bulk_sync",
    num_async: int = 1,
    ahead: bool = False,
    by_reference: bool = False,
) -> flow.LocalIterator[Batch] | flow.ParallelIterator[Batch]:
    """Source of experience from the rollout workers; pushes the learner's weights first.

    Items: ``SampleBatch`` (or ``MultiAgentBatch``). Modes:

    - ``"bulk_sync"``: each item concatenates one ``sample()`` of every remote worker (a
      barrier: all workers sample, then the next round starts when the item is pulled). With
      the config's ``sample_timeout_s`` a round takes the batches that arrived by then; a late
      one joins a later round (counter ``num_late_samples``). With ``ahead`` the next round
      is requested as soon as a round arrives, so workers sample while the learner trains
      (each round sampled with the weights before the last update).
    - ``"async"``: one worker's batch per item, as they arrive, ``num_async`` requests in
      flight per worker; ``current_actor`` is the worker that sampled it.
    - ``"raw"``: the ``ParallelIterator`` over the remote workers, for custom gathering; the
      caller counts the steps.

    With ``by_reference`` each worker keeps its batch in its object store and the items are
    `rlflow.data.refs.BatchRef` (a bulk_sync round: `BatchRefs`): references with their
    counts, which `ConcatBatches`, the learner thread and the learner actors
    (``num_learners``) take, so the data goes from the workers to the learners and never
    through the driver.

    With no remote workers, bulk_sync and async sample on the local worker. Side effects:
    ``workers.sync_weights()`` now; counters ``num_env_steps_sampled`` and
    ``num_agent_steps_sampled`` grow by each item's steps. A worker that dies is recreated with
    the same index and the learner's weights (counter ``num_worker_restarts``; see
    ``rlflow.ops.recovery``): its requests in flight are lost (never counted), a bulk_sync
    round it was part of is shorter, and the new worker joins the next one. With
    ``recreate_failed_workers=False``, or ``max_worker_restarts`` reached, a dead worker raises
    :class:`WorkerError` naming its index.

    >>> from rlflow import flow
    >>> from rlflow.algorithms.pg import PGConfig
    >>> from rlflow.algorithms.pg import PGPolicy
    >>> flow.init(backend="local")
    >>> config = PGConfig(num_workers=2, rollout_fragment_length=10, num_envs_per_worker=2)
    >>> rollouts = parallel_rollouts(WorkerSet(config, PGPolicy), mode="bulk_sync")
    >>> next(rollouts).count, rollouts.metrics.counters["num_env_steps_sampled"]
    (40, 40)
    """
    if mode not in _MODES:
        raise ConfigError(f"parallel_rollouts(mode={mode!r}): mode must be one of {_MODES}")
    check_int(num_async, "parallel_rollouts: num_async", low=1)
    remote = workers.remote_workers()
    if mode == "raw" and not remote:
        raise ConfigError(
            "parallel_rollouts(mode='raw') needs remote workers (num_workers >= 1); "
            "use mode='bulk_sync' to sample on the local worker"
        )
    workers.sync_weights()
    if not remote:
        local: flow.LocalIterator[Any] = flow.from_iterable(
            _LocalSamples(workers), name="local_rollouts"
        )
        if by_reference:
            local = local.for_each(store_batch)
        return local.for_each(count_sampled)
    shards = _worker_shards(workers)
    if by_reference:  # on each worker: its batch into its object store, its reference out
        shards = shards.for_each(store_batch)
    if mode == "raw":
        return shards
    rounds: flow.LocalIterator[Any]
    if mode == "bulk_sync":
        timeout_s = workers.config.sample_timeout_s
        rounds = shards.batch_across_shards(timeout_s=timeout_s, on_late=_count_late, ahead=ahead)
        rounds = rounds.for_each(_concat_round)
    else:
        rounds = shards.gather_async(num_async=num_async)
    return rounds.for_each(count_sampled)


def _gradients_on_worker(batch: Batch) -> Gradients:
    """Shipped to rollout actors: the gradients of the batch the worker just sampled."""
    return current_worker().compute_gradients(batch)


class _LocalGradients:
    """Sample and compute gradients forever on the local worker (no remote workers)."""

    def __init__(self, workers: WorkerSet) -> None:
        self.workers = workers

    def __iter__(self) -> Iterator[Gradients]:
        worker = self.workers.local_worker()
        while True:
            yield worker.compute_gradients(worker.sample())


class _RecordGradients:
    """Counts sampled steps, stores the learner stats and times the wait for each gradient."""

    def __init__(self) -> None:
        self._fetch_start: float | None = None

    def _on_fetch_start(self) -> None:
        self._fetch_start = time.perf_counter()

    def __call__(self, item: Gradients) -> Gradients:
        ctx = flow.current_metrics()
        if self._fetch_start is not None:
            ctx.timers[keys.GRAD_WAIT_TIMER].push(time.perf_counter() - self._fetch_start)
        ctx.counters[keys.NUM_ENV_STEPS_SAMPLED] += item.env_steps
        ctx.counters[keys.NUM_AGENT_STEPS_SAMPLED] += item.env_steps
        ctx.info[keys.LEARNER_INFO] = item.stats
        return item


def async_gradients(workers: WorkerSet) -> flow.LocalIterator[Gradients]:
    """Source of gradients computed on the rollout workers (A3C); pushes weights first.

    Items: :class:`~rlflow.workers.Gradients` ``(grads, env_steps, stats)``, one per worker sample,
    in arrival order; ``current_actor`` is the worker that computed them (use with
    ``ApplyGradients(update_all=False)``). Each worker samples and computes gradients with its
    current weights; the gradient is never computed on the driver. With no remote workers the
    local worker does both. Side effects: ``workers.sync_weights()`` now; counters
    ``num_env_steps_sampled`` / ``num_agent_steps_sampled``; ``info["learner"]`` = the stats;
    timer ``grad_wait``. A worker that dies is recreated as in :func:`parallel_rollouts`.
    """
    workers.sync_weights()
    grads: flow.LocalIterator[Gradients]
    if workers.remote_workers():
        grads = _worker_shards(workers).for_each(_gradients_on_worker).gather_async()
    else:
        grads = flow.from_iterable(_LocalGradients(workers), name="local_gradients")
    return grads.for_each(_RecordGradients())


class ConcatBatches:
    """Buffer batches until they hold at least ``min_batch_size`` env steps; emit them as one.

    Items: ``SampleBatch -> list[SampleBatch]`` (empty until enough steps arrived); batch
    references (`rlflow.data.refs.BatchRef`, `BatchRefs`) ``-> list[BatchRefs]``, the data left
    where it is (the learner actors concatenate it). Use with ``.combine``. Side effects: timer
    ``sample`` (time from the first fetch of a train batch to its emission, with its steps as
    units). Batches are never split, so the result can exceed
    ``min_batch_size`` by up to one input batch.

    >>> from rlflow import flow
    >>> batches = [SampleBatch({"x": [i, i]}) for i in range(3)]
    >>> out = flow.from_iterable(batches).combine(ConcatBatches(3)).take(2)
    >>> [b["x"].tolist() for b in out]
    [[0, 0, 1, 1]]
    """

    def __init__(self, min_batch_size: int) -> None:
        """Validate ``min_batch_size`` (an int >= 1)."""
        self.min_batch_size = check_int(min_batch_size, "ConcatBatches: min_batch_size", low=1)
        self._buffer: list[Any] = []
        self._count = 0
        self._start: float | None = None

    def _on_fetch_start(self) -> None:
        if self._start is None:
            self._start = time.perf_counter()

    def __call__(self, batch: Batch | BatchRef | BatchRefs) -> list[Any]:
        if isinstance(batch, BatchRefs):
            self._buffer.extend(batch.parts)
        elif isinstance(batch, BatchRef):
            self._buffer.append(batch)
        else:
            self._buffer.append(_check_batch(batch, "ConcatBatches"))
        self._count += batch.env_steps()
        if self._count < self.min_batch_size:
            return []
        if any(isinstance(b, BatchRef) for b in self._buffer):
            # References: a batch among them (a restored replay ring's) is stored here too.
            parts = [b if isinstance(b, BatchRef) else store_batch(b) for b in self._buffer]
            out: Any = BatchRefs(parts)
        else:
            out = SampleBatch.concat_samples(self._buffer)
        if self._start is not None:
            timer = flow.current_metrics().timers[keys.SAMPLE_TIMER]
            timer.push(time.perf_counter() - self._start, units=self._count)
        if self._count > 2 * self.min_batch_size:
            logger.info(
                "ConcatBatches: a train batch of %d steps was asked for, %d were collected; "
                "lower rollout_fragment_length * num_envs_per_worker * num_workers",
                self.min_batch_size,
                self._count,
            )
        self._buffer, self._count, self._start = [], 0, None
        return [out]


def _policy_id_list(policies: Any, where: str) -> list[str]:
    if isinstance(policies, str) or not isinstance(policies, Iterable):
        raise ConfigTypeError(f"{where}(policies={policies!r}) must be a list of policy ids")
    ids = list(policies)
    if not ids or not all(isinstance(p, str) for p in ids):
        raise ConfigError(f"{where}(policies={ids!r}) must be a non-empty list of strings")
    return ids


class SelectExperiences:
    """Keep only the experience of ``policies`` (policy ids).

    Items: ``MultiAgentBatch -> MultiAgentBatch`` (env-step count unchanged; ids missing from a
    batch are skipped); a ``SampleBatch`` is ``default_policy``'s experience and passes through
    unchanged when that id is selected, else becomes an empty ``MultiAgentBatch`` with the same
    env-step count. Use with ``.for_each``. No side effects.

    >>> b = SampleBatch({"x": [1, 2]}).as_multi_agent()
    >>> SelectExperiences(["default_policy"])(b).policy_batches["default_policy"].count
    2
    """

    def __init__(self, policies: Sequence[str]) -> None:
        """Validate ``policies`` (a non-empty list of policy ids)."""
        self.policies = _policy_id_list(policies, "SelectExperiences")

    def __call__(self, batch: Batch) -> Batch:
        _check_batch(batch, "SelectExperiences")
        if isinstance(batch, SampleBatch):
            if DEFAULT_POLICY_ID in self.policies:
                return batch
            return MultiAgentBatch({}, batch.count)
        keep = [pid for pid in self.policies if pid in batch.policy_batches]
        return batch.select(keep)


class StandardizeFields:
    """Standardize columns to mean 0 and std 1, per policy batch.

    Items: ``SampleBatch -> SampleBatch`` (or ``MultiAgentBatch`` likewise); the output is a new
    batch, the input is not modified. A constant column becomes all zeros. Use with
    ``.for_each``. No side effects.

    >>> out = StandardizeFields(["advantages"])(SampleBatch({"advantages": [1.0, 3.0]}))
    >>> out["advantages"].tolist()
    [-1.0, 1.0]
    """

    def __init__(self, fields: Sequence[str]) -> None:
        """Validate ``fields`` (a non-empty list of column names)."""
        if isinstance(fields, str) or not isinstance(fields, Iterable):
            raise ConfigError(f"StandardizeFields(fields={fields!r}) must be a list of columns")
        self.fields = list(fields)
        if not self.fields or not all(isinstance(f, str) for f in self.fields):
            raise ConfigError(
                f"StandardizeFields(fields={self.fields!r}) must be a non-empty list of strings"
            )

    def _standardize(self, batch: SampleBatch) -> SampleBatch:
        out = SampleBatch(batch)
        for name in self.fields:
            if name not in batch:
                raise PlanError(
                    f"StandardizeFields: batch has no column {name!r}; columns are {sorted(batch)}"
                )
            x = batch[name].astype(np.float64)
            std = float(x.std()) if x.size else 0.0
            scaled = (x - x.mean()) / std if std > 1e-8 else np.zeros_like(x)
            dtype = batch[name].dtype if batch[name].dtype.kind == "f" else np.float32
            out[name] = scaled.astype(dtype, copy=False)
        return out

    def __call__(self, batch: Batch) -> Batch:
        _check_batch(batch, "StandardizeFields")
        if isinstance(batch, SampleBatch):
            return self._standardize(batch)
        return MultiAgentBatch(
            {pid: self._standardize(b) for pid, b in batch.policy_batches.items()}, batch.count
        )

"""DD-PPO's operators: rounds in which every rollout worker samples and learns, and the
driver's record of them.

The source `decentralized_rounds` first joins the remote rollout workers into one
``torch.distributed`` process group (`rlflow.learner.DataParallel` with ``own_batches``: the
store and group of the ``num_learners`` learner actors, `rlflow.learner.serve_store`), then each
item is one round, run on every worker at once by `run_round`:

1. sample a fragment; once ``preemption_threshold`` of the workers have finished theirs (a
   counter in the group's store), a worker that took at least ``preemption_min_fraction`` of
   its steps stops and keeps the shorter fragment (`rlflow.workers.sampler.Sampler.sample`'s
   ``preempt``);
2. standardize its advantages (over its own batch, as RLlib's DDPPO and the paper's code do);
3. ``num_sgd_iter`` epochs of minibatch SGD on its own batch: every step's gradients are
   all-reduced among the workers, weighted by each batch's steps, so every worker takes the
   same step and their weights stay equal (`rlflow.learner.update.PolicyUpdate`).

Only a `RoundReport` per worker comes back (steps, timings, learner stats; worker 1's weights
with ``keep_local_weights_in_sync``): no sample batch reaches the driver. `RecordRound` counts
the steps in the plan's context and keeps the driver's local worker in sync.

On the local backend the workers are objects of this process; a round runs each in a thread of
its own (they meet in the all-reduces), over an in-process store.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from rlflow import flow
from rlflow.algorithms.ddppo.config import DDPPOConfig
from rlflow.data import ADVANTAGES, MultiAgentBatch, SampleBatch
from rlflow.learner import DataParallel, open_store, serve_store
from rlflow.ops import keys
from rlflow.ops.learner_info import record_learner_info
from rlflow.workers import RolloutWorker, WorkerSet

__all__ = [
    "RecordRound",
    "RunRound",
    "RoundReport",
    "RoundSettings",
    "decentralized_rounds",
    "join_group",
    "run_round",
]

PolicyID = str

_COLLECTIVE_TIMEOUT_S = 300.0
"""How long a worker waits in an all-reduce (or to join) for the slowest of the others."""
PREEMPTED: str = "num_preempted_rounds"
"""Counter: worker rounds that ended their fragment early (straggler preemption)."""


class RoundSettings(NamedTuple):
    """What every worker's rounds follow (sent once, when it joins the group)."""

    policies: list[PolicyID]
    """The policies trained."""
    num_sgd_iter: int
    """Epochs over the worker's batch per round."""
    sgd_minibatch_size: int
    """Steps of a minibatch of a full batch (`DataParallel.agree_minibatches`)."""
    preempt: bool
    """Whether a straggler can be preempted (`DDPPOConfig.preempts`)."""
    done_needed: float
    """Workers that must be done before the others stop: ``threshold * num_workers``."""
    min_steps: int
    """Steps of each env a worker always takes (`DDPPOConfig.preemption_min_steps`)."""

    @classmethod
    def of(cls, config: DDPPOConfig, policies: Sequence[PolicyID]) -> RoundSettings:
        """The settings of ``config``."""
        return cls(
            list(policies),
            config.num_sgd_iter,
            config.sgd_minibatch_size,
            config.preempts,
            config.preemption_threshold * config.num_workers,
            config.preemption_min_steps,
        )


class RoundReport(NamedTuple):
    """What one worker's round sends back to the driver (never its batch)."""

    rank: int
    """The worker's rank in the group (its index - 1)."""
    env_steps: int
    """Env steps it sampled and learned on."""
    agent_steps: int
    """Agent steps likewise."""
    preempted: bool
    """Whether its fragment was cut short by the preemption."""
    sample_s: float
    """Seconds it sampled."""
    learn_s: float
    """Seconds it learned (all-reduces included)."""
    stats: dict[PolicyID, dict[str, Any]]
    """Its learner stats per policy (the loss and gradient norm are all-reduced: the same on
    every worker)."""
    weights: dict[PolicyID, Any] | None = None
    """The trained policies' weights (rank 0, with ``keep_local_weights_in_sync``)."""
    versions: dict[PolicyID, int] | None = None
    """Their ``num_grad_updates`` (with ``weights``)."""


class _Member:
    """A worker's place in the group: its `DataParallel`, the store, its settings."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        store: Any,
        settings: RoundSettings,
        device: Any,
        *,
        shared_device: bool,
    ) -> None:
        import torch.distributed as dist

        self.rank = rank
        self.settings = settings
        self.data_parallel = DataParallel(
            rank,
            world_size,
            store,
            device=device,
            shared_device=shared_device,
            timeout_s=_COLLECTIVE_TIMEOUT_S,
            own_batches=True,
        )
        self.store = dist.PrefixStore("rlflow-ddppo-done", store)  # type: ignore[attr-defined]
        self.round = 0

    def preemption(self) -> Callable[[int], bool] | None:
        """This round's ``preempt(steps)`` for the sampler (None: never preempted)."""
        settings = self.settings
        if not settings.preempt:
            return None
        key = str(self.round)
        store, min_steps, needed = self.store, settings.min_steps, settings.done_needed

        def preempt(steps: int) -> bool:
            return steps >= min_steps and int(store.add(key, 0)) >= needed

        return preempt

    def done(self) -> None:
        """This worker finished collecting this round (counted for the others' preemption)."""
        if self.settings.preempt:
            self.store.add(str(self.round), 1)

    def finish_round(self) -> None:
        """After the round's learning (whose all-reduces every worker reached only once done
        collecting, so no one reads the round's counter any more): rank 0 drops the counter."""
        if self.settings.preempt and self.rank == 0:
            self.store.delete_key(str(self.round))
        self.round += 1


_MEMBERS: weakref.WeakKeyDictionary[RolloutWorker, _Member] = weakref.WeakKeyDictionary()
"""Each joined worker's membership (on the worker's process; keyed by the worker object)."""


def join_group(
    worker: RolloutWorker, rank: int, world_size: int, store_spec: Any, settings: RoundSettings
) -> int:
    """Shipped to a worker: join the group of ``world_size`` (every worker calls it at once);
    from now on its policies' updates all-reduce with the others'. Returns the rank."""
    store = open_store(store_spec, _COLLECTIVE_TIMEOUT_S)
    device = next(iter(worker.policy_map.values())).device
    # Workers sharing a GPU (a fractional num_gpus_per_worker) all-reduce over gloo: NCCL
    # takes one rank per device.
    shared = 0 < worker.config.num_gpus_per_worker < 1
    member = _Member(rank, world_size, store, settings, device, shared_device=shared)
    for pid in settings.policies:
        worker.get_policy(pid).update.data_parallel = member.data_parallel
    _MEMBERS[worker] = member
    return rank


def run_round(
    worker: RolloutWorker,
    global_vars: Mapping[str, Any],
    publish: bool,  # noqa: FBT001 (per rank, passed positionally through RolloutWorker.apply)
) -> RoundReport:
    """Shipped to a worker: one round, steps (1)-(3) of the module docstring; with
    ``publish`` the report carries the trained policies' weights."""
    member = _MEMBERS[worker]
    settings = member.settings
    worker.set_global_vars(global_vars)
    start = time.perf_counter()
    batch = worker.sample(preempt=member.preemption())
    member.done()
    sampled = time.perf_counter()
    full = worker.config.rollout_fragment_length * worker.config.envs_per_worker()
    for part in _policy_parts(batch, settings.policies):
        adv = np.asarray(part[ADVANTAGES], dtype=np.float32)
        part[ADVANTAGES] = (adv - adv.mean()) / max(1e-4, float(adv.std()))
    if isinstance(batch, MultiAgentBatch):
        # A trained policy none of this worker's agents played still meets the others in every
        # all-reduce (with nothing to add): an empty batch of it.
        missing = {pid: SampleBatch({}) for pid in settings.policies}
        batch = MultiAgentBatch({**missing, **batch.policy_batches}, batch.env_steps())
    stats = worker.learn_on_batch(
        batch,
        num_sgd_iter=settings.num_sgd_iter,
        sgd_minibatch_size=settings.sgd_minibatch_size,
        policies=settings.policies,
    )
    member.finish_round()
    report = RoundReport(
        member.rank,
        batch.env_steps(),
        batch.agent_steps(),
        batch.env_steps() < full,
        sampled - start,
        time.perf_counter() - sampled,
        stats,
    )
    if publish:
        report = report._replace(
            weights=worker.get_weights(settings.policies),
            versions=worker.num_grad_updates_per_policy(settings.policies),
        )
    return report


def _policy_parts(
    batch: SampleBatch | MultiAgentBatch, policies: Sequence[PolicyID]
) -> list[SampleBatch]:
    parts = batch.as_multi_agent().policy_batches
    return [parts[pid] for pid in policies if pid in parts and parts[pid].count]


class RunRound:
    """Run one round on every remote worker at once (`run_round`, steps (1)-(3) of the module
    docstring); the stage `decentralized_rounds` builds on a counter.

    Items: ``int -> list[RoundReport]`` (the round's number in, the reports in rank order out).
    Side effects: on construction, the local worker's weights to every worker and the workers
    joined in one group (`join_group`; this stage owns the group's store); each round, the
    workers' weights and their global ``timestep`` (env steps sampled so far).
    """

    def __init__(self, workers: WorkerSet, config: DDPPOConfig) -> None:
        """Join the remote workers of ``workers`` in one group with ``config``'s settings."""
        remote = workers.remote_workers()
        self.workers = workers
        self.config = config
        self.local = flow.backend_name() == "local"
        self.store, spec = serve_store(
            None if self.local else flow.node_address(), _COLLECTIVE_TIMEOUT_S
        )
        self.pool = concurrent.futures.ThreadPoolExecutor(len(remote)) if self.local else None
        policies = config.policies_to_train or list(workers.local_worker().policy_map)
        settings = RoundSettings.of(config, policies)
        # Every worker starts from the local worker's weights (they were seeded apart).
        workers.sync_weights(blocking=True)
        self._call([(join_group, (k, len(remote), spec, settings)) for k in range(len(remote))])

    def _call(self, calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]]) -> list[Any]:
        """``worker k: calls[k]`` on every remote worker at once; the results by rank."""
        remote = self.workers.remote_workers()
        if self.pool is not None:  # local backend: each worker in a thread (they all-reduce)
            futures = [
                self.pool.submit(lambda w, c: w.apply.remote(c[0], *c[1]), w, call)
                for w, call in zip(remote, calls, strict=True)
            ]
            return [flow.get(f.result()) for f in futures]
        refs = [w.apply.remote(fn, *args) for w, (fn, args) in zip(remote, calls, strict=True)]
        return list(flow.get(refs))

    def __call__(self, _round: int) -> list[RoundReport]:
        publish = self.config.keep_local_weights_in_sync
        counters = flow.current_metrics().counters
        global_vars = {"timestep": counters[keys.NUM_ENV_STEPS_SAMPLED]}
        calls = [
            (run_round, (global_vars, publish and k == 0))
            for k in range(len(self.workers.remote_workers()))
        ]
        return self._call(calls)


def decentralized_rounds(
    workers: WorkerSet, config: DDPPOConfig
) -> flow.LocalIterator[list[RoundReport]]:
    """Source of DD-PPO rounds: every remote worker samples and learns (module docstring).

    Items: ``list[RoundReport]``, one per worker in rank order, one item per round (a barrier:
    the next round starts when the item is pulled). Side effects: now, the local worker's
    weights to every remote worker (blocking) and the workers joined in one process group;
    each round, the workers' weights (equal on all of them) and global ``timestep``. A worker
    that dies fails the round with its error (no restarts: the group would have to be formed
    again).
    """
    run = RunRound(workers, config)
    return flow.from_iterable(itertools.count(), name="decentralized_rounds").for_each(run)


class RecordRound:
    """Count a round's steps and keep the driver's copy of the policies.

    Items: ``list[RoundReport] -> dict`` (``{"env_steps": ..., "preempted": ...}``). Use
    with ``.for_each`` after `decentralized_rounds`. Side effects: counters
    ``num_env_steps_sampled``/``trained``, ``num_agent_steps_sampled``/``trained``,
    ``num_train_steps`` (one per round), `PREEMPTED`; timers ``sample`` and ``learn`` (the
    slowest worker's); ``info["learner"]`` (rank 0's stats); with ``keep_local_weights_in_sync``
    the local worker loads rank 0's weights and update counts.
    """

    def __init__(self, workers: WorkerSet) -> None:
        """Keep the worker set (its local worker is the driver's copy)."""
        self.workers = workers

    def __call__(self, reports: list[RoundReport]) -> dict[str, Any]:
        ctx = flow.current_metrics()
        env_steps = sum(r.env_steps for r in reports)
        agent_steps = sum(r.agent_steps for r in reports)
        for key in (keys.NUM_ENV_STEPS_SAMPLED, keys.NUM_ENV_STEPS_TRAINED):
            ctx.counters[key] += env_steps
        for key in (keys.NUM_AGENT_STEPS_SAMPLED, keys.NUM_AGENT_STEPS_TRAINED):
            ctx.counters[key] += agent_steps
        ctx.counters[keys.NUM_TRAIN_STEPS] += 1
        preempted = sum(r.preempted for r in reports)
        ctx.counters[PREEMPTED] += preempted
        ctx.timers[keys.SAMPLE_TIMER].push(max(r.sample_s for r in reports))
        ctx.timers[keys.LEARN_TIMER].push(max(r.learn_s for r in reports))
        lead = reports[0]
        record_learner_info(lead.stats)
        if lead.weights is not None and lead.versions is not None:
            local = self.workers.local_worker()
            local.set_weights(lead.weights)
            for pid, version in lead.versions.items():
                local.get_policy(pid).update.num_grad_updates = version
        return {"env_steps": env_steps, "preempted": preempted}

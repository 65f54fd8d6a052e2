"""`LearnerGroup`: ``num_learners`` data-parallel learner actors that train as one learner.

With ``num_learners = N >= 1`` a `WorkerSet` starts N `Learner` actors beside its rollout
workers. Each holds the run's policies (a `RolloutWorker` of index 0 that never samples, its
policies on ``cuda`` with ``num_gpus_per_learner``) and a rank in a ``torch.distributed``
process group (`rlflow.learner.data_parallel`). :meth:`LearnerGroup.learn_on_batch` has the
local worker's signature, so the train operators (`rlflow.ops.TrainOneStep`, the learner
thread of IMPALA, APPO and Ape-X) target the group instead of the local worker and the plans
do not change:

1. the batch is stored once (``flow.put``) and every learner reads it (zero-copy on its node);
2. every optimizer step is split into N shards, one per learner; the gradients are averaged in
   one all-reduce per step, so each learner applies the update one learner would compute on
   the whole step (same minibatch order: every learner shuffles with the same seeded RNG);
3. learner 0 publishes the new weights with its stats: the driver's local worker loads them,
   and the weight broadcast to the rollout workers, evaluation and export read them there.

The driver's local worker stays the run's copy of the policies (checkpoints are its state:
:meth:`LearnerGroup.sync_to` copies learner 0's full state into it first, and
:meth:`LearnerGroup.sync_from` hands a restored state to every learner). Operators that
change a policy besides its update (``UpdateKL``, ``UpdateTargetNetwork``) call
:meth:`LearnerGroup.foreach_policy` too.

A learner that dies is restarted (same rank) from a surviving learner's state, every learner
joins a fresh process group, and the batch in flight is learned again; ``num_restarts`` counts
them. On the local backend the learners are objects of this process, each step run in its own
thread (a gloo group over an in-process store): the same code, deterministic, for tests.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlflow import flow
from rlflow.config import AlgorithmConfig
from rlflow.data.refs import BatchRef, BatchRefs
from rlflow.data.sample_batch import BATCH_INDEXES, MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError, WorkerError
from rlflow.learner import DataParallel, open_store, serve_store
from rlflow.policy import TorchPolicy
from rlflow.workers.rollout_worker import RolloutWorker

__all__ = ["Learner", "LearnerGroup"]

logger = logging.getLogger(__name__)

PolicyID = str
Batch = SampleBatch | MultiAgentBatch

_PING_TIMEOUT_S = 10.0
_COLLECTIVE_TIMEOUT_S = 120.0


class Learner:
    """One data-parallel learner (an actor of a `LearnerGroup`).

    Args:
        config: the run's config; the learner's policies are built as the driver's learner
            would build them, on ``cuda`` when ``num_gpus_per_learner > 0``.
        policy_cls: the algorithm's policy class.
        rank: this learner's index, 0..world_size-1.
        world_size: ``num_learners``.
        algorithm: the algorithm's name, for messages.
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        policy_cls: type[TorchPolicy],
        *,
        rank: int,
        world_size: int,
        algorithm: str | None = None,
    ) -> None:
        """Build the policies (a `RolloutWorker` of index 0 that never samples)."""
        own = config.replace(num_learners=0, num_gpus=config.num_gpus_per_learner)
        self.worker = RolloutWorker(own, policy_cls, worker_index=0, algorithm=algorithm)
        """The learner's policies (and the seeded RNG its minibatches are shuffled with)."""
        self.rank = rank
        self.world_size = world_size
        self.num_gpus = float(config.num_gpus_per_learner)
        self.data_parallel: DataParallel | None = None

    def join(self, store: Any, generation: int, timeout_s: float = _COLLECTIVE_TIMEOUT_S) -> int:
        """Join process group ``generation`` (every learner of the group calls it at once);
        return the rank."""
        device = next(iter(self.worker.policy_map.values())).device
        self.data_parallel = DataParallel(
            self.rank,
            self.world_size,
            open_store(store, timeout_s),
            generation=generation,
            device=device,
            shared_device=0 < self.num_gpus < 1,
            timeout_s=timeout_s,
        )
        for policy in self.worker.policy_map.values():
            policy.update.data_parallel = self.data_parallel
        return self.rank

    def learn_on_batch(
        self,
        batch: Batch | BatchRef | BatchRefs,
        global_vars: Mapping[str, Any],
        options: Mapping[str, Any],
        publish: bool,  # noqa: FBT001 (per rank, passed positionally by LearnerGroup._call)
    ) -> dict[str, Any]:
        """Learn this learner's shards of ``batch`` (references are fetched first;
        `RolloutWorker.learn_on_batch` with
        ``options``) after taking ``global_vars``; the reply holds ``"stats"`` and, with
        ``publish``, the trained policies' ``"weights"``, ``"versions"`` (their
        ``num_grad_updates``) and ``"nonfinite"`` (their skipped updates)."""
        self.worker.set_global_vars(global_vars)
        if isinstance(batch, BatchRef | BatchRefs):  # from the workers' object stores
            fetched = self._fetch(batch if isinstance(batch, BatchRefs) else BatchRefs([batch]))
        else:
            fetched = batch
        stats = {} if fetched is None else self.worker.learn_on_batch(fetched, **options)
        reply: dict[str, Any] = {"stats": stats}
        if publish:
            trained = list(stats)
            reply["weights"] = self.worker.get_weights(trained)
            reply["versions"] = self.worker.num_grad_updates_per_policy(trained)
            reply["nonfinite"] = {
                pid: self.worker.get_policy(pid).update.num_nonfinite_updates for pid in trained
            }
        return reply

    def _fetch(self, refs: BatchRefs) -> Batch | None:
        """The parts of ``refs`` that every learner could fetch, concatenated (None: none).

        A part is lost when the rollout worker that stored it died (its owner); the learners
        agree on what they all have (`DataParallel.all_min`), so they split the same rows and
        take the same number of steps."""
        try:
            parts: list[Any] = list(flow.get([p.ref for p in refs.parts]))
        except Exception:  # noqa: BLE001 - a lost part: fetch each, keep what is there
            parts = []
            for part in refs.parts:
                try:
                    parts.append(flow.get(part.ref))
                except Exception as err:  # noqa: BLE001
                    logger.warning("learner %d: a batch part is lost (%s)", self.rank, err)
                    parts.append(None)
        have = [int(p is not None) for p in parts]
        if self.data_parallel is not None:
            have = self.data_parallel.all_min(have)
        kept = [p for p, ok in zip(parts, have, strict=True) if ok]
        if len(kept) < len(parts):
            logger.warning(
                "learner %d: %d of %d parts of a train batch were lost (their rollout workers "
                "died); learning on the rest",
                self.rank,
                len(parts) - len(kept),
                len(parts),
            )
        if not kept:
            return None
        out: Batch = kept[0] if len(kept) == 1 else SampleBatch.concat_samples(kept)
        return out

    def get_state(self) -> dict[str, Any]:
        """The policies' states and the shuffling RNG (`RolloutWorker.get_state`)."""
        return self.worker.get_state()

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Load a `RolloutWorker.get_state` (its env part is ignored: learners never step)."""
        self.worker.set_state({**state, "env": None})

    def apply(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn(worker, *args)`` on the learner's `RolloutWorker` and return its result."""
        return fn(self.worker, *args)

    def ping(self) -> str:
        """Answer ``"ok"``: a liveness check."""
        return "ok"

    def __repr__(self) -> str:
        return f"Learner(rank={self.rank}, world_size={self.world_size})"


def _merge_stats(replies: Sequence[Mapping[PolicyID, Mapping[str, Any]]]) -> dict[str, Any]:
    """One stats dict per policy from every learner's: numbers averaged over the learners
    (the loss and gradient norm are the same on each, all-reduced), per-row arrays (TD errors
    of each learner's shard) concatenated in rank order, i.e. the batch's row order, and
    ``BATCH_INDEXES`` (the whole batch's, on every learner) taken from learner 0."""
    merged: dict[PolicyID, dict[str, Any]] = {}
    for pid, first in replies[0].items():
        out: dict[str, Any] = {}
        for key, value in first.items():
            values = [r[pid][key] for r in replies if key in r.get(pid, {})]
            if key == BATCH_INDEXES:
                out[key] = value
            elif isinstance(value, np.ndarray):
                out[key] = np.concatenate([np.asarray(v) for v in values])
            elif isinstance(value, float | int) and not isinstance(value, bool):
                out[key] = float(np.mean(values))
            else:
                out[key] = value
        merged[pid] = out
    return merged


class LearnerGroup:
    """``config.num_learners`` `Learner` actors that train as one learner (module docstring).

    Args:
        config: the run's config (``num_learners`` >= 1, ``num_cpus_per_learner``,
            ``num_gpus_per_learner``).
        policy_cls: the algorithm's policy class.
        local_worker: the driver's learner worker: its state is every learner's initial state,
            and it receives learner 0's weights after each update.
        placement: ``(placement group, first bundle)`` for the learners (learner k in bundle
            ``first + k``), or None.
        algorithm: the algorithm's name, for messages.
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        policy_cls: type[TorchPolicy],
        local_worker: RolloutWorker,
        *,
        placement: tuple[Any, int] | None = None,
        algorithm: str | None = None,
    ) -> None:
        """Start the learners, join them in one process group, give them ``local_worker``'s
        state."""
        if config.num_learners < 1:
            raise ConfigError(f"LearnerGroup: num_learners={config.num_learners} must be >= 1")
        self.config = config
        self.policy_cls = policy_cls
        self.local_worker = local_worker
        self.algorithm = algorithm
        self.num_learners = config.num_learners
        self.num_restarts = 0
        """Learner actors restarted so far."""
        self._placement = placement
        self._generation = 0
        self._local = flow.backend_name() == "local"
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._store, self._store_spec = serve_store(
            None if self._local else flow.node_address(), _COLLECTIVE_TIMEOUT_S
        )
        if self._local:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self.num_learners, thread_name_prefix="rlflow-learner"
            )
        self._learners: list[Any] = [self._start(rank) for rank in range(self.num_learners)]
        self._join_all()
        self.sync_from(local_worker)
        logger.info(
            "%d learner actors joined (%s; %s)",
            self.num_learners,
            "threads of this process" if self._local else "Ray actors",
            self.config.learner_bundle() or "no reserved resources",
        )

    # ------------------------------------------------------------------ actors and calls
    def _start(self, rank: int) -> Any:
        args = (self.config, self.policy_cls)
        kwargs: dict[str, Any] = {
            "rank": rank,
            "world_size": self.num_learners,
            "algorithm": self.algorithm,
        }
        if self._local:
            return Learner(*args, **kwargs)
        options: dict[str, Any] = {
            "num_cpus": self.config.num_cpus_per_learner,
            "num_gpus": self.config.num_gpus_per_learner,
        }
        if self._placement is not None:
            group, first = self._placement
            options.update(flow.bundle_options(group, first + rank))
        return flow.remote(Learner).options(**options).remote(*args, **kwargs)

    def _call(self, method: str, *args: Any, per_rank: Sequence[Any] | None = None) -> list[Any]:
        """``learner.<method>(*args[, per_rank[k]])`` on every learner at once; the results in
        rank order. Errors propagate (a dead Ray actor as `WorkerError`)."""
        extra = [() if per_rank is None else (per_rank[k],) for k in range(self.num_learners)]
        if self._pool is not None:
            futures = [
                self._pool.submit(getattr(learner, method), *args, *extra[k])
                for k, learner in enumerate(self._learners)
            ]
            return [f.result() for f in futures]
        refs = [
            getattr(learner, method).remote(*args, *extra[k])
            for k, learner in enumerate(self._learners)
        ]
        try:
            return list(flow.get(refs))
        finally:
            # Wait for every call to end (a failed one leaves the others in a collective that
            # fails with it) so no call of this round overlaps the next.
            flow.wait(refs, num_returns=len(refs), timeout=_COLLECTIVE_TIMEOUT_S)

    def _join_all(self) -> None:
        self._call("join", self._store_spec, self._generation)

    def _with_recovery(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        """`_call`, and when a learner actor died: restart it, then call again once."""
        try:
            return self._call(method, *args, **kwargs)
        except Exception as err:  # a dead learner's peers fail in their collective (gloo)
            if not self._restart_dead(err):
                raise
        return self._call(method, *args, **kwargs)

    def _restart_dead(self, err: BaseException) -> bool:
        """Restart every dead learner from a live one's state and re-form the process group;
        False when none is dead (``err`` was something else)."""
        if self._local:
            return False
        pings = [learner.ping.remote() for learner in self._learners]
        ready, _ = flow.wait(pings, num_returns=len(pings), timeout=_PING_TIMEOUT_S)
        alive: list[int] = []
        for rank, ref in enumerate(pings):
            try:
                if ref in ready and flow.get(ref) == "ok":
                    alive.append(rank)
            except WorkerError:
                pass
        dead = [rank for rank in range(self.num_learners) if rank not in alive]
        if not dead:
            return False
        if not alive:
            raise WorkerError(
                f"every learner actor of the group died ({err}); nothing to restart from"
            ) from err
        logger.warning(
            "learner actor(s) %s died (%s); restarting from learner %d's state",
            dead,
            err,
            alive[0],
        )
        state = flow.get(self._learners[alive[0]].get_state.remote())
        for rank in dead:
            flow.kill(self._learners[rank])
            self._learners[rank] = self._start(rank)
        self.num_restarts += len(dead)
        self._generation += 1
        self._call("set_state", state)
        self._join_all()
        return True

    # ------------------------------------------------------------------ learning
    def learners(self) -> list[Any]:
        """The learner actors (Ray handles; `Learner` objects on the local backend), by rank."""
        return list(self._learners)

    def learn_on_batch(
        self,
        batch: Batch | BatchRef | BatchRefs,
        *,
        num_sgd_iter: int = 1,
        sgd_minibatch_size: int = 0,
        policies: Sequence[PolicyID] | None = None,
    ) -> dict[PolicyID, dict[str, Any]]:
        """Train every learner on its shards of ``batch`` (arguments as
        `RolloutWorker.learn_on_batch`; a batch is stored once for all of them, references
        from ``parallel_rollouts(by_reference=True)`` are fetched by each); load learner 0's
        new weights into the local worker; return the merged stats per policy
        (`_merge_stats`)."""
        options: dict[str, Any] = {}
        if num_sgd_iter != 1 or sgd_minibatch_size != 0:
            options.update(num_sgd_iter=num_sgd_iter, sgd_minibatch_size=sgd_minibatch_size)
        if policies is not None:
            options["policies"] = list(policies)
        global_vars = {
            k: v
            for k, v in self.local_worker.global_vars.items()
            if k != "num_grad_updates_per_policy"
        }
        # Stored once for all learners; references travel as they are (each learner fetches).
        by_reference = self._local or isinstance(batch, BatchRef | BatchRefs)
        payload = batch if by_reference else flow.put(batch)
        replies = self._with_recovery(
            "learn_on_batch",
            payload,
            global_vars,
            options,
            per_rank=[rank == 0 for rank in range(self.num_learners)],
        )
        lead = replies[0]
        local = self.local_worker
        local.set_weights(lead["weights"])
        for pid, version in lead["versions"].items():
            update = local.get_policy(pid).update
            update.num_grad_updates = version
            update.num_nonfinite_updates = lead["nonfinite"][pid]
        return _merge_stats([r["stats"] for r in replies])

    def foreach_policy(self, policy_id: PolicyID, method: str, *args: Any) -> list[Any]:
        """Call ``policy.<method>(*args)`` on policy ``policy_id`` of every learner (e.g.
        ``update_target``, ``update_kl``); the results in rank order."""
        return self._with_recovery("apply", _call_policy, policy_id, method, args)

    def foreach_learner(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """``fn(worker, *args)`` on every learner's `RolloutWorker`; the results in rank
        order."""
        return self._with_recovery("apply", fn, *args)

    # ------------------------------------------------------------------ state
    def sync_from(self, worker: RolloutWorker) -> None:
        """Give every learner ``worker``'s policies' states and RNG (at start, after a
        restore)."""
        state = {**worker.get_state(), "env": None}
        self._with_recovery("set_state", state)

    def sync_to(self, worker: RolloutWorker) -> None:
        """Load learner 0's full policy states (weights, optimizer, counters) and RNG into
        ``worker`` (the driver's learner worker, before a checkpoint); its observation filters
        and envs stay its own."""
        lead = self._learners[0]
        try:  # only learner 0's: every learner holds the same state
            state = lead.get_state() if self._local else flow.get(lead.get_state.remote())
        except Exception as err:  # a dead learner 0: restarted, then asked again
            if not self._restart_dead(err):
                raise
            state = flow.get(self._learners[0].get_state.remote())
        for pid, policy_state in state["policies"].items():
            worker.get_policy(pid).set_state(policy_state)
        worker.set_rng_state(state["rng"])

    def stop(self) -> None:
        """Stop the learners (kill the actors; the local backend's threads end)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        else:
            for learner in self._learners:
                flow.kill(learner)
        self._learners = []

    def __repr__(self) -> str:
        return f"LearnerGroup(num_learners={self.num_learners}, restarts={self.num_restarts})"


def _call_policy(
    worker: RolloutWorker, policy_id: PolicyID, method: str, args: Sequence[Any]
) -> Any:
    return getattr(worker.get_policy(policy_id), method)(*args)

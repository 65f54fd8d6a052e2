"""Train operators: update the learner (the local worker) and push its weights to the workers.

All are stages for ``for_each``: :class:`TrainOneStep` (learn on a batch),
:class:`ComputeGradients` / :class:`AverageGradients` / :class:`ApplyGradients` (the gradient
path of A2C microbatching and A3C), :class:`UpdateKL` (after a train step: each policy's
adaptive KL coefficient, PPO's and ppo_dqn's PPO branch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from rlflow import flow
from rlflow.checks import check_int
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError, PlanError
from rlflow.learner import POLICY_LAG
from rlflow.ops import keys
from rlflow.ops.learner_info import record_learner_info
from rlflow.ops.rollout import _check_batch, _policy_id_list
from rlflow.workers import Gradients, WorkerSet

__all__ = [
    "ApplyGradients",
    "AverageGradients",
    "ComputeGradients",
    "TrainOneStep",
    "TrainResult",
    "UpdateKL",
]

Batch = SampleBatch | MultiAgentBatch


class TrainResult(NamedTuple):
    """What a learner update emits: the env steps it trained on and the loss stats."""

    env_steps: int
    """Env steps in the batch (or gradients) the update used."""
    stats: dict[str, dict[str, float]]
    """Per policy id, the learner stats of the update."""


def _global_vars() -> dict[str, Any]:
    """The values pushed with the weights: ``{"timestep": env steps sampled}``."""
    return {"timestep": flow.current_metrics().counters[keys.NUM_ENV_STEPS_SAMPLED]}


def _push_weights(
    workers: WorkerSet, policies: Sequence[str] | None, to: Sequence[Any] | None = None
) -> None:
    """One ``put`` of the learner's weights, sent to ``to`` (default: every remote worker)."""
    if not workers.remote_workers():
        return
    ctx = flow.current_metrics()
    with ctx.timers[keys.UPDATE_TIMER].timing():
        workers.sync_weights(_global_vars(), policies=policies, to=to)
    ctx.counters[keys.NUM_WEIGHT_SYNCS] += 1


class TrainOneStep:
    """Train the learner on each batch, then broadcast its weights to the remote workers.

    Items: ``SampleBatch | MultiAgentBatch -> TrainResult``. Use with ``.for_each`` after
    ``ConcatBatches``. One step on the whole batch, or with ``num_sgd_iter`` > 1 or
    ``sgd_minibatch_size`` > 0: ``num_sgd_iter`` epochs over shuffled minibatches of
    ``sgd_minibatch_size`` rows (0: whole batch). Only ``policies`` train (default: all).
    With ``num_learners`` >= 1 the worker set's learner actors train (`WorkerSet.learner`,
    `rlflow.workers.learner_group`) and the local worker receives their weights.
    Side effects: the local worker's weights; one ``put`` of the new weights, sent
    (fire-and-forget) to every remote worker with ``{"timestep": sampled steps}``; counters
    ``num_env_steps_trained``, ``num_agent_steps_trained``, ``num_train_steps`` (and, for
    ``MultiAgentBatch`` items, ``num_train_steps/<policy id>`` per policy trained); timers
    ``learn`` and ``update``; ``info["learner"][policy_id]`` for each policy trained.
    """

    def __init__(
        self,
        workers: WorkerSet,
        *,
        policies: Sequence[str] | None = None,
        num_sgd_iter: int = 1,
        sgd_minibatch_size: int = 0,
    ) -> None:
        """Validate the arguments (policy ids must exist on the local worker)."""
        self.workers = workers
        self.policies = None if policies is None else _policy_id_list(policies, "TrainOneStep")
        known = set(workers.local_worker().policy_map)
        for pid in self.policies or ():
            if pid not in known:
                raise ConfigError(f"TrainOneStep: unknown policy {pid!r}; known: {sorted(known)}")
        self.num_sgd_iter = check_int(num_sgd_iter, "TrainOneStep: num_sgd_iter", low=1)
        self.sgd_minibatch_size = check_int(
            sgd_minibatch_size, "TrainOneStep: sgd_minibatch_size", low=0
        )

    def __call__(self, batch: Batch) -> TrainResult:
        _check_batch(batch, "TrainOneStep")
        ctx = flow.current_metrics()
        with ctx.timers[keys.LEARN_TIMER].timing(units=batch.env_steps()):
            stats = self.workers.learner().learn_on_batch(
                batch,
                num_sgd_iter=self.num_sgd_iter,
                sgd_minibatch_size=self.sgd_minibatch_size,
                policies=self.policies,
            )
        # Merged per policy: plans that train policies in separate branches report them all.
        record_learner_info(stats, merge=True)
        ctx.counters[keys.NUM_ENV_STEPS_TRAINED] += batch.env_steps()
        ctx.counters[keys.NUM_AGENT_STEPS_TRAINED] += batch.agent_steps()
        ctx.counters[keys.NUM_TRAIN_STEPS] += 1
        if isinstance(batch, MultiAgentBatch):
            for pid in stats:
                ctx.counters[f"{keys.NUM_TRAIN_STEPS}/{pid}"] += 1
        _push_weights(self.workers, self.policies)
        return TrainResult(batch.env_steps(), stats)


class ComputeGradients:
    """Compute the learner's gradients on each batch, without applying them.

    Items: ``SampleBatch -> Gradients(grads, env_steps, stats)``. Use with ``.for_each``, then
    ``.batch(k)`` and :class:`AverageGradients`. Side effects: timer ``compute_grads``;
    ``info["learner"]``. Weights do not change.
    """

    def __init__(self, workers: WorkerSet) -> None:
        """Keep the worker set (its local worker computes)."""
        self.workers = workers

    def __call__(self, batch: Batch) -> Gradients:
        _check_batch(batch, "ComputeGradients")
        ctx = flow.current_metrics()
        with ctx.timers[keys.COMPUTE_GRADS_TIMER].timing(units=batch.env_steps()):
            grads = self.workers.local_worker().compute_gradients(batch)
        ctx.info[keys.LEARNER_INFO] = grads.stats
        return grads


class AverageGradients:
    """Combine a list of gradients into the gradient of the mean loss over all their rows.

    Items: ``list[Gradients] -> Gradients``. Use with ``.for_each`` after ``.batch(k)``.
    Each loss is a mean over its batch, so the gradient of the mean loss over the union of the
    batches is the count-weighted mean ``sum(n_k * g_k) / sum(n_k)``; that is what this emits
    (the original summed, which scales the step with ``k``). Exact when the per-batch gradients
    were not clipped. Stats are count-weighted means too. No side effects.

    >>> import numpy as np
    >>> a = Gradients({"p": [np.array([1.0])]}, 1, {"p": {}})
    >>> b = Gradients({"p": [np.array([4.0])]}, 3, {"p": {}})
    >>> out = AverageGradients()([a, b])
    >>> out.grads["p"][0].tolist(), out.env_steps
    ([3.25], 4)
    """

    def __call__(self, items: Sequence[Gradients]) -> Gradients:
        if not items:
            raise PlanError("AverageGradients got an empty list; use it after .batch(k)")
        total = sum(g.env_steps for g in items)
        if total <= 0:
            raise PlanError("AverageGradients: the gradients cover 0 env steps in all")
        grads: dict[str, list[Any]] = {}
        stats: dict[str, dict[str, float]] = {}
        for pid in items[0].grads:
            parts = [g for g in items if pid in g.grads]
            weight = sum(g.env_steps for g in parts)
            grads[pid] = [
                sum((g.env_steps / weight) * np.asarray(g.grads[pid][j]) for g in parts)
                for j in range(len(items[0].grads[pid]))
            ]
            keys_ = items[0].stats.get(pid, {})
            stats[pid] = {
                k: sum(g.env_steps * g.stats[pid][k] for g in parts) / weight for k in keys_
            }
        versions = {  # the oldest weights among the parts
            pid: min(g.num_grad_updates[pid] for g in items if pid in g.num_grad_updates)
            for pid in items[0].num_grad_updates
        }
        return Gradients(grads, total, stats, versions)


def _as_gradients(item: Any) -> Gradients:
    if isinstance(item, Gradients):
        return item
    if isinstance(item, tuple) and len(item) == 2:
        return Gradients(item[0], int(item[1]), {})
    raise PlanError(f"ApplyGradients takes Gradients or a (grads, count) tuple, got {item!r}")


class ApplyGradients:
    """Apply gradients on the learner, then push its weights to remote workers.

    Items: ``Gradients`` (or a ``(grads, count)`` tuple) ``-> TrainResult``. Use with
    ``.for_each`` after :func:`async_gradients` or :class:`AverageGradients`.
    ``update_all=True`` sends the weights to every remote worker; ``False`` only to
    ``current_metrics().current_actor``, the worker that produced the gradients (A3C; a
    :class:`PlanError` if no current actor is known). Side effects: local weights; one ``put``;
    counters ``num_env_steps_trained``, ``num_agent_steps_trained``, ``num_train_steps``;
    timers ``apply_grad``, ``update``.
    """

    def __init__(
        self,
        workers: WorkerSet,
        *,
        policies: Sequence[str] | None = None,
        update_all: bool = True,
    ) -> None:
        """Validate the arguments."""
        if not isinstance(update_all, bool):
            raise ConfigError(f"ApplyGradients(update_all={update_all!r}) must be a bool")
        self.workers = workers
        self.policies = None if policies is None else _policy_id_list(policies, "ApplyGradients")
        self.update_all = update_all

    def __call__(self, item: Gradients | tuple[Any, int]) -> TrainResult:
        grads = _as_gradients(item)
        ctx = flow.current_metrics()
        selected = {
            pid: g
            for pid, g in grads.grads.items()
            if self.policies is None or pid in self.policies
        }
        local = self.workers.local_worker()
        stats = {pid: dict(grads.stats.get(pid, {})) for pid in grads.stats}
        for pid in selected:
            if pid in grads.num_grad_updates:
                lag = local.get_policy(pid).update.num_grad_updates - grads.num_grad_updates[pid]
                stats.setdefault(pid, {})[POLICY_LAG] = float(lag)
        with ctx.timers[keys.APPLY_GRAD_TIMER].timing(units=grads.env_steps):
            local.apply_gradients(selected)
        record_learner_info(stats)
        ctx.counters[keys.NUM_ENV_STEPS_TRAINED] += grads.env_steps
        ctx.counters[keys.NUM_AGENT_STEPS_TRAINED] += grads.env_steps
        ctx.counters[keys.NUM_TRAIN_STEPS] += 1
        if self.update_all or not self.workers.remote_workers():
            _push_weights(self.workers, self.policies)
        else:
            actor = ctx.current_actor
            if actor is None:
                raise PlanError(
                    "ApplyGradients(update_all=False) needs the source actor of the gradients; "
                    "use it after async_gradients() (or gather_async)"
                )
            _push_weights(self.workers, self.policies, to=[actor])
        return TrainResult(grads.env_steps, stats)


class UpdateKL:
    """Adapt each policy's KL coefficient to the mean KL of the last train step.

    Items: ``TrainResult -> TrainResult`` (unchanged). Use with ``.for_each`` after
    ``TrainOneStep``. Every policy of the result whose stats have ``kl`` and that has an
    ``update_kl`` method (PPO's) adapts; others are left alone. Side effects: ``kl_coeff`` of
    the learner's policies (only the learner computes the loss, so workers need not know it);
    the new value as ``stats["kl_coeff"]`` (``info["learner"][pid]``); with learner actors,
    theirs too (the same update from the same value).
    """

    def __init__(self, workers: WorkerSet) -> None:
        """Keep the worker set (its local worker holds the policies)."""
        self.workers = workers

    def __call__(self, result: TrainResult) -> TrainResult:
        group = self.workers.learner_group()
        for pid, stats in result.stats.items():
            policy = self.workers.local_worker().get_policy(pid)
            update = getattr(policy, "update_kl", None)
            if update is not None and "kl" in stats:
                stats["kl_coeff"] = update(stats["kl"])
                if group is not None:  # the learner actors compute the loss
                    group.foreach_policy(pid, "update_kl", stats["kl"])
        return result

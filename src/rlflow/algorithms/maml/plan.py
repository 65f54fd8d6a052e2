"""The MAML plan: every worker adapts to a task of its own, the learner meta-updates.

Finn et al., "Model-Agnostic Meta-Learning for Fast Adaptation of Deep Networks" (ICML 2017);
Liang et al., "RLlib Flow" (NeurIPS 2021), Table 1 (MAML: 136 lines in RLlib)::

    (1) sync weights; set_task(a sampled task) on every remote worker
    (2) from_actors(workers).for_each(InnerAdaptation(K))    # on each worker: sample D^0,
            -> batch_across_shards()                         # adapt, sample D^1, ... D^K
    (3) -> RecordAdaptation                                  # counts, pre/post returns
    (4) -> MetaUpdate                                        # maml_optimizer_steps Adam steps,
                                                             # sync weights, resample tasks
    (5) -> standard_metrics_reporting

Unlike RLlib 1.x, whose driver-side transform sent every sampled batch back to its worker for
each inner step (K + 1 barriers per meta-batch), the inner loop runs on the workers: one
round trip per meta-batch, and batches travel only to the learner.

Results carry ``info["maml"]`` (:data:`MAML_INFO`) of the last meta-batch:
``episode_return_mean_adapt_<k>`` for k = 0 (pre-adaptation) .. K (after K inner steps), the
mean over tasks of the mean return of the episodes sampled with those parameters, and
``adaptation_delta`` = adapt_K - adapt_0. ``episode_return_mean`` mixes all of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from rlflow import flow
from rlflow.algorithms.maml.config import MAMLConfig
from rlflow.algorithms.maml.policy import MAMLPolicy, episode_returns
from rlflow.checks import check_int
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.envs import make_env_creator
from rlflow.errors import ActorDiedError, ConfigError
from rlflow.flow import LocalIterator
from rlflow.ops import (
    TrainResult,
    keys,
    parallel_rollouts,
    record_learner_info,
    standard_metrics_reporting,
)
from rlflow.workers import WorkerSet, current_worker

__all__ = [
    "MAML_INFO",
    "AdaptationResult",
    "InnerAdaptation",
    "MetaUpdate",
    "RecordAdaptation",
    "TaskSampler",
    "maml_plan",
]

MAML_INFO: Final = "maml"
"""``ctx.info[MAML_INFO]`` (and ``result["info"]["maml"]``): the adaptation returns."""


def maml_plan(workers: WorkerSet, config: MAMLConfig) -> LocalIterator[dict[str, Any]]:
    """Build the MAML plan over ``workers``; each item is one iteration's result dict."""
    tasks = TaskSampler(config)
    # (1) Meta-parameters to every worker (a recreated worker too), and a task of its own.
    shards = parallel_rollouts(workers, mode="raw")
    tasks.assign(workers.remote_workers())
    workers.on_recreate(lambda worker: tasks.assign([worker]))
    # (2) Each worker samples, takes K inner steps and samples again; one round per meta-batch.
    adaptations = shards.for_each(
        InnerAdaptation(config.inner_adaptation_steps)
    ).batch_across_shards()
    train_op = (
        # (3) Count the samples; returns before and after each inner step.
        adaptations.for_each(RecordAdaptation())
        # (4) The meta-update on the learner, then new weights and new tasks to the workers.
        .for_each(MetaUpdate(workers, tasks, num_steps=config.maml_optimizer_steps))
    )
    # (5) One result per iteration.
    return standard_metrics_reporting(train_op, workers, config)


class AdaptationResult(NamedTuple):
    """What one worker returns for its task: the batches and their mean episode returns."""

    batches: list[SampleBatch]
    """``D^0 .. D^K``: sampled before any inner step, then after each (advantages set)."""
    returns: list[float]
    """Mean return of the episodes in each batch (nan if none ended in it)."""


def _current_task(env: Any) -> Any:
    return getattr(env, "unwrapped", env).get_task()


def _single_agent(batch: SampleBatch | MultiAgentBatch) -> SampleBatch:
    """The default policy's rows (MAML runs single-agent envs)."""
    if isinstance(batch, SampleBatch):
        return batch
    return batch.policy_batches[DEFAULT_POLICY_ID]


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


class InnerAdaptation:
    """Adapt the worker's policy to its task with ``inner_steps`` policy-gradient steps.

    Items: ``SampleBatch`` (the worker's sample with the meta-parameters) ->
    :class:`AdaptationResult`. Use with ``.for_each`` on ``flow.from_actors(rollout workers)``:
    it runs on the worker (:func:`~rlflow.workers.current_worker`). Side effects, on that
    worker: its policy's weights become the adapted ones (the next weight sync undoes that);
    before each new sample its envs restart under the same task (``set_task``), so every batch
    starts fresh episodes.
    """

    def __init__(self, inner_steps: int) -> None:
        """Validate ``inner_steps`` (an int >= 0)."""
        self.inner_steps = check_int(inner_steps, "InnerAdaptation: inner_steps", low=0)

    def __call__(self, batch: SampleBatch | MultiAgentBatch) -> AdaptationResult:
        worker = current_worker()
        policy = worker.get_policy()
        if not isinstance(policy, MAMLPolicy):
            raise ConfigError(f"InnerAdaptation needs a MAMLPolicy, got {type(policy).__name__}")
        batches = [policy.with_baseline_advantages(_single_agent(batch))]
        for _ in range(self.inner_steps):
            policy.adapt(batches[-1])
            worker.set_task(worker.foreach_env(_current_task)[0])
            batches.append(policy.with_baseline_advantages(_single_agent(worker.sample())))
        return AdaptationResult(batches, [_mean(episode_returns(b)) for b in batches])


class RecordAdaptation:
    """Count the meta-batch's samples and record its returns per adaptation step.

    Items: ``list[AdaptationResult]`` (one per worker) -> the same list. Use with ``.for_each``
    after ``batch_across_shards``. Side effects: counters ``num_env_steps_sampled`` and
    ``num_agent_steps_sampled``; ``info["maml"]`` (see the module docstring).
    """

    def __call__(self, results: list[AdaptationResult]) -> list[AdaptationResult]:
        ctx = flow.current_metrics()
        steps = sum(b.count for r in results for b in r.batches)
        ctx.counters[keys.NUM_ENV_STEPS_SAMPLED] += steps
        ctx.counters[keys.NUM_AGENT_STEPS_SAMPLED] += steps
        per_step = list(zip(*(r.returns for r in results), strict=True))
        info = {
            f"episode_return_mean_adapt_{k}": _mean([x for x in rets if not math.isnan(x)])
            for k, rets in enumerate(per_step)
        }
        last = f"episode_return_mean_adapt_{len(per_step) - 1}"
        info["adaptation_delta"] = info[last] - info["episode_return_mean_adapt_0"]
        ctx.info[MAML_INFO] = info
        return results


class MetaUpdate:
    """Meta-update the learner on a meta-batch; push the weights; give workers new tasks.

    Items: ``list[AdaptationResult] -> TrainResult``. Use with ``.for_each`` after
    :class:`RecordAdaptation`. Side effects: the local policy's weights
    (:meth:`MAMLPolicy.meta_update`, ``num_steps`` Adam steps) and its adaptive ``kl_coeff``;
    one ``put`` of the weights to every remote worker; a new task per remote worker; counters
    ``num_env_steps_trained`` (every batch: the meta-gradient reads all of them),
    ``num_agent_steps_trained``, ``num_train_steps``, ``num_weight_syncs``; timers ``learn``
    and ``update``; ``info["learner"]``.
    """

    def __init__(self, workers: WorkerSet, tasks: TaskSampler, *, num_steps: int) -> None:
        """Keep the workers and the task sampler; validate ``num_steps`` (an int >= 1)."""
        self.workers, self.tasks = workers, tasks
        self.num_steps = check_int(num_steps, "MetaUpdate: num_steps", low=1)

    def __call__(self, results: list[AdaptationResult]) -> TrainResult:
        ctx = flow.current_metrics()
        policy = self.workers.local_worker().get_policy()
        if not isinstance(policy, MAMLPolicy):
            raise ConfigError(f"MetaUpdate needs a MAMLPolicy, got {type(policy).__name__}")
        steps = sum(b.count for r in results for b in r.batches)
        with ctx.timers[keys.LEARN_TIMER].timing(units=steps):
            stats = policy.meta_update([r.batches for r in results], num_steps=self.num_steps)
        if policy.kl_coeff > 0.0:
            stats["kl_coeff"] = policy.update_kl(stats["kl"])
        record_learner_info({DEFAULT_POLICY_ID: stats})
        ctx.counters[keys.NUM_ENV_STEPS_TRAINED] += steps
        ctx.counters[keys.NUM_AGENT_STEPS_TRAINED] += steps
        ctx.counters[keys.NUM_TRAIN_STEPS] += 1
        with ctx.timers[keys.UPDATE_TIMER].timing():
            sampled = ctx.counters[keys.NUM_ENV_STEPS_SAMPLED]
            self.workers.sync_weights({"timestep": sampled})
            self.tasks.assign(self.workers.healthy_workers())
        ctx.counters[keys.NUM_WEIGHT_SYNCS] += 1
        return TrainResult(steps, {DEFAULT_POLICY_ID: stats})


class TaskSampler:
    """Draws tasks from one env of the config's task-settable env, on the driver.

    The env is built with ``seed=config.seed`` (unless ``env_config`` sets ``seed``, or the
    env takes no ``seed``), so a seeded run draws the same tasks every time.
    """

    def __init__(self, config: MAMLConfig) -> None:
        """Build the env whose ``sample_tasks`` draws the tasks."""
        kwargs = dict(config.env_config)
        env: Any = None
        if config.seed is not None and "seed" not in kwargs:
            try:
                env = make_env_creator(config.env, **kwargs, seed=config.seed)()
            except TypeError:
                env = None  # the env takes no seed: its task stream is its own
        self.env: Any = env if env is not None else make_env_creator(config.env, **kwargs)()
        """The env that samples tasks (never stepped)."""

    def sample(self, n: int) -> list[Any]:
        """``n`` tasks from the env's task distribution."""
        return list(getattr(self.env, "unwrapped", self.env).sample_tasks(n))

    def assign(self, remote_workers: Sequence[Any]) -> list[Any]:
        """Draw one task per remote worker and set it there (waits, so errors surface here;
        a worker found dead is skipped: its replacement is given a task when it starts)."""
        tasks = self.sample(len(remote_workers))
        refs = [w.set_task.remote(t) for w, t in zip(remote_workers, tasks, strict=True)]
        for ref in refs:
            try:
                flow.get(ref)
            except ActorDiedError:
                continue
        return tasks

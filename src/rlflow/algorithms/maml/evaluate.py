"""Measure how well a policy adapts: returns before and after inner steps on given tasks."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rlflow import flow
from rlflow.algorithms.maml.config import MAMLConfig
from rlflow.algorithms.maml.plan import AdaptationResult, InnerAdaptation
from rlflow.algorithms.maml.policy import MAMLPolicy
from rlflow.errors import ConfigError
from rlflow.workers import WorkerSet

__all__ = ["adaptation_returns"]


def adaptation_returns(
    config: MAMLConfig, weights: Mapping[str, Any], tasks: Sequence[Any]
) -> list[float]:
    """Mean episode return over ``tasks`` after 0, 1, .. ``config.inner_adaptation_steps``
    inner steps (``inner_lr``) from ``weights`` (a worker's ``get_weights()``).

    Starts a :class:`WorkerSet` of its own (``config.num_workers`` remote workers, stopped at
    the end), so it needs free CPUs on Ray: stop the training workers first. Tasks are run
    ``num_workers`` at a time, each worker starting from ``weights``; item k of the result is
    the mean over tasks of the task's mean return with the parameters after k inner steps.
    """
    if not tasks:
        raise ConfigError("adaptation_returns: tasks must be a non-empty list")
    workers = WorkerSet(config, MAMLPolicy)
    try:
        workers.local_worker().set_weights(weights)
        remote = workers.remote_workers()
        rounds = (
            flow.from_actors(remote, name="adaptation_workers")
            .for_each(InnerAdaptation(config.inner_adaptation_steps))
            .batch_across_shards()
        )
        found: list[AdaptationResult] = []
        for start in range(0, len(tasks), len(remote)):
            chunk = list(tasks[start : start + len(remote)])
            padded = chunk + [chunk[0]] * (len(remote) - len(chunk))
            workers.sync_weights()
            for ref in [w.set_task.remote(t) for w, t in zip(remote, padded, strict=True)]:
                flow.get(ref)
            found.extend(next(rounds)[: len(chunk)])
    finally:
        workers.stop()
    per_step = zip(*(r.returns for r in found), strict=True)
    return [math.fsum(rets) / len(rets) for rets in per_step]

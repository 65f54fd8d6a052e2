"""Records a rollout worker returns: `Gradients` (of one batch) and `WorkerMetrics` (per report)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy.typing as npt

from rlflow.envs import EpisodeStat

__all__ = ["Gradients", "WorkerMetrics"]

Array = npt.NDArray[Any]
PolicyID = str


class WorkerMetrics(NamedTuple):
    """What a worker reports once per iteration (`RolloutWorker.pop_metrics`)."""

    episodes: list[EpisodeStat]
    """Episodes finished since the last report, in the order they ended."""
    env_restarts: int
    """Sub-envs rebuilt since the last report."""
    nonfinite_episodes: int = 0
    """Episodes dropped for a NaN or infinite reward or observation since the last report
    (``on_nonfinite="skip"``)."""


class Gradients(NamedTuple):
    """Gradients of one batch: ``(grads, env_steps)`` plus the learner stats of the loss."""

    grads: dict[PolicyID, list[Array]]
    """Per policy, one array per trainable parameter (as ``PolicyUpdate.compute_gradients``)."""
    env_steps: int
    """Env steps in the batch the gradients were computed on (the "count")."""
    stats: dict[PolicyID, dict[str, float]]
    """Per policy, the loss stats (``policy_loss``, ``vf_loss``, ...)."""
    num_grad_updates: Mapping[PolicyID, int] = {}
    """Per policy, the ``num_grad_updates`` of the weights the gradients were computed with
    (on a rollout worker: those it sampled with); the learner applying them reports its own
    count minus this as the policy lag. Empty: unknown (no lag reported)."""

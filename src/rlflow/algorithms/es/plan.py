"""The ES plan: workers evaluate antithetic perturbations, the driver ranks and steps.

Salimans et al., "Evolution Strategies as a Scalable Alternative to Reinforcement Learning"
(2017), Algorithm 2 (parallelized ES with shared noise) as a dataflow::

    (1) noise table: made once, stored once (one copy per node); each worker gets its reference
    (2) perturbation_evaluations: theta stored once per iteration; each worker is sent integer
            indices i and plays theta + sigma eps_i and theta - sigma eps_i (and, with
            eval_prob, theta itself); it answers (i, returns, lengths)
    (3) -> RecordEvaluations                 # steps counted; unperturbed episodes reported
    (4) -> ESUpdate                          # centered ranks; g = sum_i (r+_i - r-_i) eps_i / n
                                             # (the driver slices eps_i from its own table);
                                             # Adam on -g + l2_coeff theta; theta' sent with
                                             # the next round
    (5) -> standard_metrics_reporting        # the workers' observation filters merged, results

The driver's work per evaluation is a share of one call per worker and round and a few
vectorized numpy operations (`rlflow.data.noise.weighted_noise_sum`): it is not the limit
below hundreds of workers (``benchmarks/es_throughput.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.algorithms.es.config import ESConfig
from rlflow.algorithms.perturbation.evaluate import (
    EvaluationRound,
    RecordEvaluations,
    apply_theta,
    centered_ranks,
    make_noise_table,
    perturbation_evaluations,
)
from rlflow.algorithms.perturbation.policy import FlatPolicy
from rlflow.data.noise import SharedNoiseTable, weighted_noise_sum
from rlflow.errors import ConfigError
from rlflow.flow import LocalIterator
from rlflow.ops import TrainResult, standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["ESUpdate", "es_gradient", "es_plan"]


def es_plan(workers: WorkerSet, config: ESConfig) -> LocalIterator[dict[str, Any]]:
    """Build the ES plan over ``workers``; each item is one iteration's result dict."""
    # (1) The noise table, once; (2) the workers evaluate pairs of perturbations.
    noise = make_noise_table(config)
    evaluations = perturbation_evaluations(
        workers,
        noise,
        config,
        min_pairs=math.ceil(config.episodes_per_batch / 2),
        min_steps=config.train_batch_size,
    )
    # (3) Count and report; (4) rank, estimate the gradient, take an Adam step.
    train_op = evaluations.for_each(RecordEvaluations()).for_each(ESUpdate(workers, noise, config))
    # (5) Filters merged once per iteration, then the result.
    return standard_metrics_reporting(train_op, workers, config)


def es_gradient(
    returns: npt.ArrayLike, noise_indices: npt.ArrayLike, table: npt.NDArray[np.float32], dim: int
) -> npt.NDArray[np.float64]:
    """ES's gradient estimate: centered ranks ``R`` of all ``2n`` returns, then
    ``sum_i (R[i, 0] - R[i, 1]) * table[i0 : i0 + dim] / (2n)`` (RLlib's ``ES``).

    >>> t = np.arange(8, dtype=np.float32)
    >>> es_gradient([[1.0, 0.0], [0.0, 2.0]], [0, 4], t, 2).round(4).tolist()
    [-0.6667, -0.6667]
    """
    ranks = centered_ranks(returns)
    weights = ranks[:, 0] - ranks[:, 1]
    return weighted_noise_sum(table, weights, noise_indices, dim) / ranks.size


class ESUpdate:
    """One ES step on a round of evaluations; see :func:`es_gradient`.

    Items: ``EvaluationRound -> TrainResult``. Use with ``.for_each`` after
    `RecordEvaluations`. Side effects: the local policy's theta, after an Adam step
    (``stepsize``) on ``-g + l2_coeff * theta`` (the policy's optimizer state); what
    `apply_theta` records (``info["learner"]``: ``grad_norm``, ``weights_norm``,
    ``update_ratio``).
    """

    def __init__(self, workers: WorkerSet, noise: SharedNoiseTable, config: ESConfig) -> None:
        """Keep the workers, the driver's noise table and ``l2_coeff``."""
        self.workers, self.noise, self.l2_coeff = workers, noise, float(config.l2_coeff)
        policy = workers.local_worker().get_policy()
        if not isinstance(policy, FlatPolicy) or policy.optimizer is None:
            raise ConfigError(f"ESUpdate needs an ESPolicy, got {type(policy).__name__}")
        self.policy = policy

    def __call__(self, item: EvaluationRound) -> TrainResult:
        theta = item.theta.astype(np.float64)
        g = es_gradient(item.returns, item.noise_indices, self.noise.array, theta.size)
        assert self.policy.optimizer is not None
        new = self.policy.optimizer.step(theta, -g + self.l2_coeff * theta)
        return apply_theta(self.workers, item, new, {"grad_norm": float(np.linalg.norm(g))})

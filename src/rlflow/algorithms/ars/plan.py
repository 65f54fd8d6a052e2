"""The ARS plan: ES's dataflow with augmented random search's update (V2-t).

Mania, Guy and Recht, "Simple random search provides a competitive approach to reinforcement
learning" (NeurIPS 2018), Algorithm 2 (V2-t) as a dataflow::

    (1) noise table: made once, stored once (one copy per node); each worker gets its reference
    (2) perturbation_evaluations: theta stored once per iteration; num_rollouts directions
            delta_k sent as indices; each worker plays theta + nu delta_k and theta - nu delta_k
            (and, with eval_prob, theta itself); it answers (k, returns, lengths)
    (3) -> RecordEvaluations      # steps counted; unperturbed episodes reported
    (4) -> ARSUpdate              # the b = rollouts_used directions of largest max(r+, r-);
                                  # theta += alpha / (b sigma_R) sum (r+ - r-) delta
    (5) -> standard_metrics_reporting   # the state normalization (MeanStdFilter) merged, results
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.algorithms.ars.config import ARSConfig
from rlflow.algorithms.perturbation.evaluate import (
    EvaluationRound,
    RecordEvaluations,
    apply_theta,
    make_noise_table,
    perturbation_evaluations,
)
from rlflow.data.noise import SharedNoiseTable, weighted_noise_sum
from rlflow.flow import LocalIterator
from rlflow.ops import TrainResult, standard_metrics_reporting
from rlflow.workers import WorkerSet

__all__ = ["ARSUpdate", "ars_plan", "ars_step"]


def ars_plan(workers: WorkerSet, config: ARSConfig) -> LocalIterator[dict[str, Any]]:
    """Build the ARS plan over ``workers``; each item is one iteration's result dict."""
    # (1) The noise table, once; (2) the workers evaluate num_rollouts directions.
    noise = make_noise_table(config)
    evaluations = perturbation_evaluations(workers, noise, config, min_pairs=config.num_rollouts)
    # (3) Count and report; (4) the top-b directions' step.
    train_op = evaluations.for_each(RecordEvaluations()).for_each(ARSUpdate(workers, noise, config))
    # (5) State normalization merged once per iteration, then the result.
    return standard_metrics_reporting(train_op, workers, config)


def ars_step(
    returns: npt.ArrayLike,
    noise_indices: npt.ArrayLike,
    table: npt.NDArray[np.float32],
    dim: int,
    rollouts_used: int,
) -> tuple[npt.NDArray[np.float64], float]:
    """ARS V2-t's step direction and ``sigma_R``: the ``rollouts_used`` (b) pairs of largest
    ``max(r+, r-)``, then ``sum_k (r+_k - r-_k) delta_k / (b * sigma_R)``, ``sigma_R`` the std
    of their ``2b`` returns (the step is zero when it is 0). Multiply by the step size.

    >>> t = np.arange(8, dtype=np.float32)
    >>> step, sigma = ars_step([[1.0, 0.0], [0.0, 5.0]], [0, 4], t, 2, rollouts_used=1)
    >>> step.tolist(), sigma
    ([-8.0, -10.0], 2.5)
    """
    r = np.asarray(returns, dtype=np.float64)
    idx = np.asarray(noise_indices, dtype=np.int64)
    top = np.argsort(-r.max(axis=1), kind="stable")[:rollouts_used]
    used = r[top]
    sigma = float(used.std())
    if sigma == 0.0:
        return np.zeros(dim), sigma
    g = weighted_noise_sum(table, used[:, 0] - used[:, 1], idx[top], dim)
    return g / (len(top) * sigma), sigma


class ARSUpdate:
    """One ARS step on a round of evaluations; see :func:`ars_step`.

    Items: ``EvaluationRound -> TrainResult``. Use with ``.for_each`` after
    `RecordEvaluations`. Side effects: the local policy's theta (``theta += sgd_stepsize *
    step``); what `apply_theta` records (``info["learner"]``: ``sigma_r``, ``grad_norm``,
    ``weights_norm``, ``update_ratio``).
    """

    def __init__(self, workers: WorkerSet, noise: SharedNoiseTable, config: ARSConfig) -> None:
        """Keep the workers, the driver's noise table, ``rollouts_used`` and the step size."""
        self.workers, self.noise = workers, noise
        self.rollouts_used, self.stepsize = config.rollouts_used, config.sgd_stepsize

    def __call__(self, item: EvaluationRound) -> TrainResult:
        theta = item.theta.astype(np.float64)
        step, sigma = ars_step(
            item.returns, item.noise_indices, self.noise.array, theta.size, self.rollouts_used
        )
        stats = {"sigma_r": sigma, "grad_norm": float(np.linalg.norm(step))}
        return apply_theta(self.workers, item, theta + self.stepsize * step, stats)

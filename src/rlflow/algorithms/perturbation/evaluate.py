"""Perturbations evaluated on the rollout workers: the source of ES's and ARS's plans.

The driver side, :func:`perturbation_evaluations`, is a source of one :class:`EvaluationRound`
per iteration. Once, it makes the shared noise table and hands each remote worker its
reference (`rlflow.data.noise.install_noise`; a recreated worker too). Each iteration it stores
``theta`` once (``flow.put``) and sends every healthy worker one call, its share of the
iteration's antithetic pairs as a :class:`PerturbationRequest` (integer noise indices, a count
of unperturbed episodes, a seed); rounds repeat until the iteration has ``min_pairs`` pairs and
``min_steps`` env steps. A worker runs :func:`evaluate_perturbations`: all the episodes of its
request at once, one env per parameter vector, the actions of every vector from one batched
numpy forward pass per step (`batched_forward`), and answers with a
:class:`PerturbationResult`: indices, returns and lengths only. The driver's cost per
evaluation is therefore a share of one call per worker and round, and the update's
vectorized numpy (`rlflow.data.noise.weighted_noise_sum`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from rlflow import flow
from rlflow.algorithms.perturbation.config import PerturbationConfig
from rlflow.algorithms.perturbation.policy import FlatPolicy
from rlflow.algorithms.perturbation.worker import (
    PerturbationRequest,
    PerturbationResult,
    evaluate_perturbations,
)
from rlflow.data.noise import (
    SharedNoiseTable,
    install_noise,
)
from rlflow.envs import EpisodeStat
from rlflow.errors import ActorDiedError, ConfigError, WorkerError
from rlflow.flow import LocalIterator
from rlflow.ops import TrainResult, keys, record_learner_info
from rlflow.ops.metrics import report_episodes
from rlflow.ops.recovery import recreate_in_plan
from rlflow.workers import WorkerSet

__all__ = [
    "EvaluatePerturbations",
    "EvaluationRound",
    "apply_theta",
    "RecordEvaluations",
    "centered_ranks",
    "make_noise_table",
    "perturbation_evaluations",
]

Array = npt.NDArray[Any]


class EvaluationRound(NamedTuple):
    """One iteration's evaluations, every worker's results concatenated."""

    theta: npt.NDArray[np.float32]
    """The parameters the perturbations were added to."""
    noise_indices: npt.NDArray[np.int64]
    """``[n]`` indices."""
    returns: npt.NDArray[np.float64]
    """``[n, 2]`` returns (positive, negative perturbation)."""
    lengths: npt.NDArray[np.int64]
    """``[n, 2]`` lengths."""
    eval_returns: npt.NDArray[np.float64]
    """Returns of the unperturbed episodes."""
    eval_lengths: npt.NDArray[np.int64]
    """Their lengths."""

    @property
    def env_steps(self) -> int:
        """Env steps of every episode of the round."""
        return int(self.lengths.sum() + self.eval_lengths.sum())


def centered_ranks(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """The ranks of ``x``'s entries (over the whole array) scaled to [-0.5, 0.5]
    (Salimans et al. 2017, fitness shaping; RLlib's ``compute_centered_ranks``). Ties get
    distinct ranks in ``argsort`` order.

    >>> centered_ranks([3.0, -1.0, 10.0, 0.0, 5.0]).tolist()
    [0.0, -0.5, 0.5, -0.25, 0.25]
    """
    a = np.asarray(x)
    ranks = np.empty(a.size, dtype=np.float32)
    ranks[a.ravel().argsort(kind="stable")] = np.arange(a.size, dtype=np.float32)
    out = ranks.reshape(a.shape)
    if a.size > 1:
        out /= a.size - 1
    out -= 0.5
    return out


# --------------------------------------------------------------------------- driver side
def make_noise_table(config: PerturbationConfig) -> SharedNoiseTable:
    """The run's noise table: ``noise_size`` entries from ``noise_seed``, stored once
    (`rlflow.data.noise.SharedNoiseTable.create`; a too large one is a `ConfigError` naming
    ``noise_size``)."""
    return SharedNoiseTable.create(
        config.noise_size, seed=config.noise_seed, where=f"{type(config).__name__}.noise_size"
    )


def perturbation_evaluations(
    workers: WorkerSet,
    noise: SharedNoiseTable,
    config: PerturbationConfig,
    *,
    min_pairs: int,
    min_steps: int = 0,
) -> LocalIterator[EvaluationRound]:
    """Source of one :class:`EvaluationRound` per iteration; see the module docstring.

    Items: ``EvaluationRound`` of at least ``min_pairs`` antithetic pairs and ``min_steps``
    env steps, evaluated around the local policy's current theta (read at the start of each
    round, so an update between items is what the next one evaluates). Side effects: the noise
    table's reference sent to every remote worker (`rlflow.data.noise.install_noise`), now and
    to each recreated one; one ``put`` of theta per iteration; counter ``num_weight_syncs``. A
    worker that dies is recreated (its share of the round is asked again of the others) or,
    with recreation off, ends the run with a ``WorkerError`` naming it.
    """
    if not workers.remote_workers():
        raise ConfigError("perturbation_evaluations needs remote workers (num_workers >= 1)")
    for handle in workers.remote_workers():
        handle.apply.remote(install_noise, noise.key, noise.ref)
    workers.on_recreate(lambda h: h.apply.remote(install_noise, noise.key, noise.ref))
    rounds = EvaluatePerturbations(workers, config, noise, min_pairs=min_pairs, min_steps=min_steps)
    # A stage, not the source itself: it runs inside the plan's context (counters, recovery).
    return flow.from_iterable(itertools.count(), name="perturbation_rounds").for_each(rounds)


class EvaluatePerturbations:
    """One iteration's evaluations around the local policy's theta; see
    :func:`perturbation_evaluations`, which builds it.

    Items: ``int`` (the round's number, ignored) ``-> EvaluationRound``. Use with ``.for_each``
    on a counting source. Side effects: one ``put`` of theta per item; calls to the healthy
    remote workers (one per worker and round); a dead worker recreated
    (`rlflow.ops.recovery.recreate_in_plan`).
    """

    def __init__(
        self,
        workers: WorkerSet,
        config: PerturbationConfig,
        noise: SharedNoiseTable,
        *,
        min_pairs: int,
        min_steps: int,
    ) -> None:
        """Keep the workers, the config and the table; seed the RNG that draws the noise
        indices, the unperturbed episodes and the env seeds (``config.seed``)."""
        self.workers, self.config, self.noise = workers, config, noise
        self.min_pairs, self.min_steps = int(min_pairs), int(min_steps)
        self.rng = np.random.default_rng(config.seed)
        policy = workers.local_worker().get_policy()
        if not isinstance(policy, FlatPolicy):
            raise ConfigError(
                f"perturbation_evaluations needs a FlatPolicy, got {type(policy).__name__}"
            )
        self.policy = policy

    def __call__(self, _round: int) -> EvaluationRound:
        """One iteration's evaluations."""
        ctx = flow.current_metrics()
        theta = self.policy.flat_weights()
        theta_ref = flow.put(theta)
        ctx.counters[keys.NUM_WEIGHT_SYNCS] += 1
        results: list[PerturbationResult] = []
        pairs = steps = 0
        while pairs < self.min_pairs or steps < self.min_steps:
            handles = self.workers.healthy_workers()
            if not handles:
                raise WorkerError(
                    "no healthy rollout worker is left to evaluate perturbations (their "
                    "replacements have not started); check the workers' logs"
                )
            # The pairs still missing; then, for the steps still missing, one pair per worker.
            wanted = self.min_pairs - pairs if pairs < self.min_pairs else len(handles)
            for part in self._ask(handles, theta.size, theta_ref, wanted):
                results.append(part)
                pairs += len(part.noise_indices)
                steps += int(part.lengths.sum() + part.eval_lengths.sum())
        return EvaluationRound(
            theta,
            np.concatenate([r.noise_indices for r in results]),
            np.concatenate([r.returns for r in results]),
            np.concatenate([r.lengths for r in results]),
            np.concatenate([r.eval_returns for r in results]),
            np.concatenate([r.eval_lengths for r in results]),
        )

    def _ask(
        self, handles: list[Any], dim: int, theta_ref: Any, pairs: int
    ) -> list[PerturbationResult]:
        """Split ``pairs`` over ``handles`` (one call each) and gather the answers."""
        shares = [pairs // len(handles) + (i < pairs % len(handles)) for i in range(len(handles))]
        calls = []
        for handle, share in zip(handles, shares, strict=True):
            if share == 0:
                continue
            request = PerturbationRequest(
                self.noise.sample_indices(self.rng, share, dim),
                int(self.rng.binomial(share, self.config.eval_prob)),
                int(self.rng.integers(0, 2**31 - 1)),
            )
            ref = handle.apply.remote(
                evaluate_perturbations, self.noise.key, theta_ref, request, self.config.noise_stdev
            )
            calls.append((handle, ref))
        out = []
        for handle, ref in calls:
            try:
                out.append(flow.get(ref))
            except ActorDiedError as err:
                index = self.workers.worker_index(handle)
                recreate_in_plan(self.workers, index, dead=handle, error=err)
            except WorkerError as err:
                raise self.workers.worker_failure(err) from err
        return out


class RecordEvaluations:
    """Count a round's env steps; report its unperturbed episodes as the run's episodes.

    Items: ``EvaluationRound -> EvaluationRound``. Use with ``.for_each`` after
    :func:`perturbation_evaluations`. Side effects: counters ``num_env_steps_sampled`` and
    ``num_agent_steps_sampled`` (every episode's steps); the unperturbed episodes to the
    metrics (`rlflow.ops.metrics.report_episodes`); ``info["perturbations"]``: the round's
    pairs, the mean and max of its perturbed returns.
    """

    def __call__(self, item: EvaluationRound) -> EvaluationRound:
        ctx = flow.current_metrics()
        steps = item.env_steps
        ctx.counters[keys.NUM_ENV_STEPS_SAMPLED] += steps
        ctx.counters[keys.NUM_AGENT_STEPS_SAMPLED] += steps
        report_episodes(
            [
                EpisodeStat(float(r), int(n))
                for r, n in zip(item.eval_returns, item.eval_lengths, strict=True)
            ]
        )
        ctx.info["perturbations"] = {
            "pairs": len(item.noise_indices),
            "perturbed_return_mean": float(item.returns.mean()),
            "perturbed_return_max": float(item.returns.max()),
            "eval_episodes": len(item.eval_returns),
            "eval_return_mean": (
                float(item.eval_returns.mean()) if len(item.eval_returns) else math.nan
            ),
        }
        return item


def apply_theta(
    workers: WorkerSet, item: EvaluationRound, theta: Array, stats: dict[str, float]
) -> TrainResult:
    """The end of an ES or ARS update: load ``theta`` into the local (driver's) policy, which
    the next round stores and sends to the workers; record the update.

    Side effects: the local policy's weights; counters ``num_env_steps_trained`` and
    ``num_agent_steps_trained`` (the round's steps), ``num_train_steps``; ``info["learner"]``
    (``stats`` plus ``weights_norm`` and ``update_ratio``, ``|theta' - theta| / |theta|``).
    """
    ctx = flow.current_metrics()
    policy = workers.local_worker().get_policy()
    assert isinstance(policy, FlatPolicy)
    old = item.theta.astype(np.float64)
    new = np.asarray(theta, dtype=np.float64)
    norm = float(np.linalg.norm(old))
    stats = {
        **stats,
        "weights_norm": float(np.linalg.norm(new)),
        "update_ratio": float(np.linalg.norm(new - old)) / norm if norm > 0 else math.inf,
    }
    policy.set_flat_weights(new.astype(np.float32))
    policy.update.num_grad_updates += 1
    record_learner_info({policy.policy_id: stats})
    steps = item.env_steps
    ctx.counters[keys.NUM_ENV_STEPS_TRAINED] += steps
    ctx.counters[keys.NUM_AGENT_STEPS_TRAINED] += steps
    ctx.counters[keys.NUM_TRAIN_STEPS] += 1
    return TrainResult(steps, {policy.policy_id: stats})

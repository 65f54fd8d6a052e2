"""Drive an algorithm's tuned plan to a target return: the helper of the learning tests."""

from __future__ import annotations

import logging
import time
from typing import NamedTuple

from rlflow import flow
from rlflow.algorithms import get_algorithm, tuned_config
from rlflow.workers import WorkerSet

logger = logging.getLogger(__name__)


class LearningOutcome(NamedTuple):
    """What a run to a target did.

    Attributes:
        algo: the algorithm's name.
        best: the best ``episode_return_mean`` seen (``-inf`` if no episode finished).
        steps: env steps sampled when the run stopped.
        trained: env steps trained when the run stopped.
        seconds: wall-clock seconds of the run (plan construction included).
        learner_queue_mean: mean learner-thread inqueue size in the last result (0.0 for
            plans without a learner thread).
    """

    algo: str
    best: float
    steps: int
    trained: int
    seconds: float
    learner_queue_mean: float


def train_to_target(
    algo: str,
    target: float,
    budget: int,
    *,
    env: str = "CartPole-v1",
    steps_per_iteration: int = 2000,
) -> LearningOutcome:
    """Run ``algo``'s plan with its tuned config for ``env`` on the active backend until the
    mean return reaches ``target`` or ``budget`` env steps were sampled.

    The plan is driven directly, as the trainer does; results come every
    ``steps_per_iteration`` sampled env steps, so that is how often the target is checked.
    """
    spec = get_algorithm(algo)
    config = tuned_config(algo, env, min_steps_per_iteration=steps_per_iteration)
    workers = WorkerSet(config, spec.policy_cls)
    start = time.perf_counter()
    best, steps, trained, queue_mean = float("-inf"), 0, 0, 0.0
    try:
        for result in spec.plan(workers, config):
            ret = result["episode_return_mean"]
            if ret is not None:
                best = max(best, ret)
            steps, trained = result["num_env_steps_sampled"], result["num_env_steps_trained"]
            thread_info = result["info"].get("learner_thread") or {}
            queue_mean = float(thread_info.get("inqueue_size_mean", 0.0))
            if (ret is not None and ret >= target) or steps >= budget:
                break
    finally:
        workers.stop()
    outcome = LearningOutcome(
        algo, best, steps, trained, round(time.perf_counter() - start, 1), queue_mean
    )
    logger.info("%s on %s: %s", algo, flow.backend_name(), outcome)
    return outcome

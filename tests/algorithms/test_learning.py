"""Learning tier: each algorithm reaches its CartPole-v1 target within a step budget.

Targets (issue 3): PPO 475 within 100k env steps, A2C 400 within 500k, A3C 300 within 500k,
PG 150 within 300k; "return" is ``episode_return_mean`` over the last 100 finished episodes.
Fixed seed (0, the configs' default); the tuned configs shipped with the package are used as they
are. Plans are driven directly, as the trainer does. Run with::

    python -m pytest tests/algorithms/test_learning.py -m learning -s
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rlflow import flow
from rlflow.algorithms import get_algorithm, tuned_config
from rlflow.workers import WorkerSet

pytestmark = [pytest.mark.learning, pytest.mark.timeout(300)]

STEPS_PER_ITERATION = 2000
"""Iterations of about 2000 env steps: the target is checked this often."""


@pytest.fixture(scope="module")
def ray_backend() -> Iterator[None]:
    """A Ray session of 2 CPUs for this module (test modules importable by the workers)."""
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (tests_dir, os.environ.get("PYTHONPATH", "")) if p
    )
    flow.init(backend="ray", num_cpus=2, include_dashboard=False)
    yield
    flow.shutdown()


def train_to_target(algo: str, target: float, budget: int) -> dict[str, Any]:
    """Run ``algo``'s tuned CartPole plan until the mean return reaches ``target`` or
    ``budget`` env steps were sampled; return what happened."""
    spec = get_algorithm(algo)
    config = tuned_config(algo, "CartPole-v1", min_steps_per_iteration=STEPS_PER_ITERATION)
    workers = WorkerSet(config, spec.policy_cls)
    start = time.perf_counter()
    best = float("-inf")
    try:
        for result in spec.plan(workers, config):
            ret = result["episode_return_mean"]
            best = max(best, ret if ret is not None else best)
            steps = result["num_env_steps_sampled"]
            if ret is not None and ret >= target:
                break
            if steps >= budget:
                break
    finally:
        workers.stop()
    seconds = time.perf_counter() - start
    outcome = {"algo": algo, "steps": steps, "seconds": round(seconds, 1), "best": best}
    print(f"\n{algo} on {flow.backend_name()}: {outcome}")
    return outcome


CASES = [
    pytest.param("pg", 150.0, 300_000, id="pg"),
    pytest.param("a2c", 400.0, 500_000, id="a2c"),
    pytest.param("ppo", 475.0, 100_000, id="ppo"),
]


@pytest.mark.parametrize(("algo", "target", "budget"), CASES)
def test_learns_on_local_backend(
    local_backend: None, algo: str, target: float, budget: int
) -> None:
    outcome = train_to_target(algo, target, budget)
    assert outcome["best"] >= target, outcome
    assert outcome["steps"] <= budget, outcome


@pytest.mark.ray
@pytest.mark.parametrize(
    ("algo", "target", "budget"),
    [pytest.param("a3c", 300.0, 500_000, id="a3c"), pytest.param("ppo", 475.0, 100_000, id="ppo")],
)
def test_learns_on_ray(ray_backend: None, algo: str, target: float, budget: int) -> None:
    outcome = train_to_target(algo, target, budget)
    assert outcome["best"] >= target, outcome
    assert outcome["steps"] <= budget, outcome

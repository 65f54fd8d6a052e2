"""Learning tier: each algorithm reaches its CartPole-v1 target within a step budget.

Targets (issue 3): PPO 475 within 100k env steps, A2C 400 within 500k, A3C 300 within 500k,
PG 150 within 300k; "return" is ``episode_return_mean`` over the last 100 finished episodes.
Fixed seed (0, the configs' default); the tuned configs shipped with the package are used as they
are. Plans are driven directly, as the trainer does. Run with::

    python -m pytest tests/algorithms/test_learning.py -m learning -s
"""

from __future__ import annotations

import pytest

from rlflow.testing.learning import ASYNC_TARGETS, train_to_target

pytestmark = [pytest.mark.learning, pytest.mark.timeout(300)]


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
    assert outcome.best >= target, outcome
    assert outcome.steps <= budget, outcome


@pytest.mark.ray
@pytest.mark.parametrize(
    ("algo", "target", "budget"),
    [
        pytest.param("a3c", *ASYNC_TARGETS["a3c"], id="a3c"),
        pytest.param("ppo", 475.0, 100_000, id="ppo"),
    ],
)
def test_learns_on_ray(ray_backend: None, algo: str, target: float, budget: int) -> None:
    outcome = train_to_target(algo, target, budget)
    assert outcome.best >= target, outcome
    assert outcome.steps <= budget, outcome

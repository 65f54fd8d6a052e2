"""Learning tier: ES on CartPole-v1 on Ray (issue 45).

ES with its tuned config (``es/tuned/CartPole-v1.yaml``: 2 workers, 40 perturbed episodes and
at least 2,000 env steps per iteration, half as many unperturbed episodes as pairs) reaches a
100-episode mean of 475 -- the mean return of the last 100 unperturbed episodes, those with
theta itself -- within 500k env steps (every episode's steps counted, perturbed or not).
Measured on 2026-11-29 (2 loaded cores): seed 0 reached 475.1 at 252k steps in 11.6 s of
plan time on Ray (the same on the local backend: the run is deterministic); seeds 1, 2, 3 on
the local backend at 239k, 329k and 312k, so the budget is 1.5x the slowest seed. PPO's
CartPole test on Ray (``tests/algorithms/test_learning.py``, 475 within 100k steps) took
the wall time given in the issue's note beside it.
"""

from __future__ import annotations

import pytest

from rlflow.testing.learning import train_to_target

pytestmark = [pytest.mark.learning, pytest.mark.ray, pytest.mark.timeout(300)]

TARGET = 475.0
BUDGET = 500_000


def test_es_reaches_475_on_cartpole_on_ray(ray_backend: None) -> None:
    outcome = train_to_target("es", TARGET, BUDGET)
    print(f"\nES on CartPole-v1 (Ray): {outcome}")
    assert outcome.best >= TARGET, outcome
    assert outcome.steps <= BUDGET, outcome

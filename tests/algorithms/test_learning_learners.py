"""Learning tier with data-parallel learner actors (``num_learners=2``) on Ray.

PPO keeps its usual CartPole-v1 target and budget (475 within 100k env steps) with its update
split over two learner actors; IMPALA learns with two learner actors that fetch the batches from
the rollout workers by reference (the driver off the data path), to the async target of
`rlflow.testing.learning.ASYNC_TARGETS`. On this 2-core machine the learners reserve no CPU
(``num_cpus_per_learner=0``) so that they fit beside the rollout workers.
"""

from __future__ import annotations

import pytest

from rlflow.testing.learning import ASYNC_TARGETS, train_to_target

pytestmark = [pytest.mark.learning, pytest.mark.ray]

LEARNERS = {"num_learners": 2, "num_cpus_per_learner": 0}


@pytest.mark.timeout(400)
def test_ppo_with_two_learner_actors_reaches_475_within_its_usual_budget(
    ray_backend: None,
) -> None:
    outcome = train_to_target("ppo", 475.0, 100_000, overrides=LEARNERS)
    assert outcome.best >= 475.0 and outcome.steps <= 100_000, outcome


@pytest.mark.timeout(1200)  # as IMPALA's own learning test: seed 0, or seed 1 after a miss
def test_impala_with_two_learner_actors_learns_cartpole(ray_backend: None) -> None:
    target, budget = ASYNC_TARGETS["impala"]
    outcomes = [train_to_target("impala", target, budget, seed=0, overrides=LEARNERS)]
    if outcomes[0].best < target:
        outcomes.append(train_to_target("impala", target, budget, seed=1, overrides=LEARNERS))
    last = outcomes[-1]
    assert last.best >= target and last.steps <= budget, outcomes
    assert last.trained > 0, outcomes

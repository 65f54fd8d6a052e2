"""Learning tier for SAC and TD3 (issue 14): each reaches a mean return of -250 on Pendulum-v1
within 20,000 env steps, seed 0, with its shipped tuned config.

"Return" is ``episode_return_mean`` over the last 10 finished episodes (the tuned configs'
``metrics_num_episodes_for_smoothing``; a 100-episode mean would still hold the first, random
episodes at 20k steps). Both configs train one batch per sampled step (``training_intensity``
= ``train_batch_size``, a whole number of batches per round), so the sample/train ratio, and
with it the curve, does not depend on the machine's load. SAC runs on the local backend; TD3
on Ray, sampling on one remote rollout worker. Run::

    python -m pytest tests/algorithms/test_learning_sac_td3.py -m learning -s
"""

from __future__ import annotations

import pytest

from rlflow.testing.learning import train_to_target

pytestmark = [pytest.mark.learning, pytest.mark.timeout(400)]

TARGET, BUDGET = -250.0, 20_000


def test_sac_learns_pendulum_on_local_backend(local_backend: None) -> None:
    outcome = train_to_target(
        "sac", TARGET, BUDGET, env="Pendulum-v1", steps_per_iteration=1000, seed=0
    )
    assert outcome.best >= TARGET, outcome
    assert outcome.steps <= BUDGET, outcome


@pytest.mark.ray
def test_td3_learns_pendulum_on_ray_with_a_remote_worker(ray_backend: None) -> None:
    outcome = train_to_target(
        "td3",
        TARGET,
        BUDGET,
        env="Pendulum-v1",
        steps_per_iteration=1000,
        seed=0,
        overrides={"num_workers": 1},
    )
    assert outcome.best >= TARGET, outcome
    assert outcome.steps <= BUDGET, outcome

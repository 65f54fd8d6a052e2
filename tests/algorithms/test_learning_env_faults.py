"""Learning tier, issue 11 part 3: PPO learns CartPole although its envs keep crashing.

``rlflow/CartPoleCrashing-v1`` raises in ``step`` with probability 1e-3 per step (about one
crash every two full-length episodes); with ``restart_failed_sub_environments=True`` each
failed sub-env is rebuilt in place and its partial episode dropped. PPO with the CartPole-v1
tuned config must still reach a mean return of 450 within PPO's usual budget of 100k env steps
(tests/algorithms/test_learning.py). Fixed seed (0), local backend. Run with::

    python -m pytest tests/algorithms/test_learning_env_faults.py -m learning -s
"""

from __future__ import annotations

import logging

import pytest

from rlflow.algorithms import get_algorithm, tuned_config
from rlflow.envs import CARTPOLE_CRASHING_ID
from rlflow.workers import WorkerSet

pytestmark = [pytest.mark.learning, pytest.mark.timeout(600)]

logger = logging.getLogger(__name__)

TARGET = 450.0
BUDGET = 100_000
P_CRASH = 1e-3


def test_ppo_learns_cartpole_with_crashing_envs(local_backend: None) -> None:
    spec = get_algorithm("ppo")
    config = tuned_config(
        "ppo",
        "CartPole-v1",
        env=CARTPOLE_CRASHING_ID,
        env_config={"p_crash": P_CRASH},
        restart_failed_sub_environments=True,
        min_steps_per_iteration=2000,
    )
    workers = WorkerSet(config, spec.policy_cls)
    best, steps, restarts = float("-inf"), 0, 0
    try:
        for result in spec.plan(workers, config):
            restarts = result["num_env_restarts"]  # over the run, from every worker
            if result["episode_return_mean"] is not None:
                best = max(best, result["episode_return_mean"])
            steps = result["num_env_steps_sampled"]
            if best >= TARGET or steps >= BUDGET:
                break
    finally:
        workers.stop()
    print(f"crashing CartPole, p={P_CRASH}: best {best} at {steps} steps, {restarts} restarts")
    assert restarts > 0  # the envs did crash
    assert best >= TARGET, (best, steps)
    assert steps <= BUDGET, (best, steps)

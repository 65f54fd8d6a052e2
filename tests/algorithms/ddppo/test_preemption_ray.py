"""DD-PPO's straggler preemption with real workers (Ray): a slowed worker stops collecting
once the others are done, learns on the steps it has, and every worker's weights stay equal."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlflow import flow
from rlflow.algorithms import get_algorithm
from rlflow.algorithms.ddppo import DDPPOConfig
from rlflow.algorithms.ddppo.decentralized import (
    PREEMPTED,
    RecordRound,
    RoundReport,
    decentralized_rounds,
)
from rlflow.workers import RolloutWorker, WorkerSet

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

DELAY_S = 0.1
"""Seconds the slowed worker's env sleeps per step: its 10 unpreemptible steps take 1 s, the
others' whole 40-step fragments well under that even on a loaded machine."""


def _slow_down(worker: RolloutWorker, delay_s: float) -> int:
    """Make every sub-env of ``worker`` sleep ``delay_s`` before each step."""
    import time

    def patch(env: Any) -> None:
        step = env.step

        def slow_step(action: Any) -> Any:
            time.sleep(delay_s)
            return step(action)

        env.step = slow_step

    return len(worker.foreach_env(patch))


def _flat(handle: Any) -> np.ndarray:
    weights = flow.get(handle.get_weights.remote())["default_policy"]
    return np.concatenate([np.asarray(weights[k]).ravel() for k in sorted(weights)])


def test_a_slowed_worker_is_preempted_and_its_partial_batch_is_learned(
    ray_backend: None,
) -> None:
    # 3 workers at 0.5: once 2 are done (1.5 needed) the third stops, after at least
    # 0.25 * 40 = 10 steps.
    config = DDPPOConfig(
        env="CartPole-v1",
        num_workers=3,
        num_cpus_per_worker=0,  # three workers beside the driver on a 2-CPU session
        num_envs_per_worker=1,
        rollout_fragment_length=40,
        train_batch_size=40,
        sgd_minibatch_size=20,
        num_sgd_iter=2,
        preemption_threshold=0.5,
        seed=0,
    )
    assert config.preempts and config.preemption_min_steps == 10
    workers = WorkerSet(config, get_algorithm("ddppo").policy_cls)
    try:
        slow = workers.remote_workers()[2]
        assert flow.get(slow.apply.remote(_slow_down, DELAY_S)) == 1
        reports: list[list[RoundReport]] = []
        rounds = decentralized_rounds(workers, config)
        train_op = rounds.for_each(lambda r: reports.append(r) or RecordRound(workers)(r))
        before = _flat(workers.remote_workers()[0])
        for n in range(1, 3):
            next(train_op)
            fast_a, fast_b, straggler = reports[-1]
            assert (fast_a.env_steps, fast_b.env_steps) == (40, 40), reports[-1]
            assert not fast_a.preempted and not fast_b.preempted
            # Preempted at its first chance: the others were done long before.
            assert straggler.preempted and straggler.env_steps == 10, straggler
            # Its 10 steps were learned on: as many steps (2 epochs of 2 minibatches) as the
            # others', in the same all-reduces.
            for report in reports[-1]:
                assert report.stats["default_policy"]["num_steps"] == 4.0
            weights = [_flat(w) for w in workers.remote_workers()]
            np.testing.assert_array_equal(weights[0], weights[1])
            np.testing.assert_array_equal(weights[0], weights[2])
            assert not np.array_equal(weights[0], before)
            before = weights[0]
            counters = train_op.metrics.counters
            assert counters[PREEMPTED] == n
            assert counters["num_env_steps_trained"] == 90 * n
        train_op.close()
    finally:
        workers.stop()

"""``sample_timeout_s`` on Ray: a bulk-sync round closes without a straggler, whose batch joins
a later round, counted once.

Worker 2's env blocks in ``step`` until a gate file exists, so "late" does not depend on timing:
the round deadline (5 s) is generous for the fast worker (a few ms per sample) and the slow one
cannot answer before the test opens the gate.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlflow.algorithms import PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.data import EPS_ID
from rlflow.errors import ConfigError
from rlflow.ops import keys, parallel_rollouts
from rlflow.workers import WorkerSet, current_worker

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180)]

FRAGMENT = 5
EPS_STRIDE = 1_000_000_000  # episode ids are worker_index * stride + n


class GatedEnv(gym.Env[np.ndarray, int]):
    """Steps at once, except on rollout worker ``slow_worker``: there ``step`` waits for
    the file ``gate`` to exist."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, gate: str = "", slow_worker: int = 2) -> None:
        self.gate = gate
        self.slow_worker = slow_worker
        self._slow: bool | None = None

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._slow is None:
            try:
                self._slow = current_worker().worker_index == self.slow_worker
            except ConfigError:  # not in a worker's stream (the driver's probe)
                self._slow = False
        while self._slow and not os.path.exists(self.gate):
            time.sleep(0.01)
        return np.zeros(2, np.float32), 1.0, False, False, {}


def worker_ids(batch: Any) -> list[int]:
    return sorted({int(i) for i in batch[EPS_ID] // EPS_STRIDE})


def test_a_round_closes_without_the_straggler_and_a_later_one_counts_it(
    ray_backend: None, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    config = PGConfig(
        env=GatedEnv,
        env_config={"gate": str(gate)},
        num_workers=2,
        num_envs_per_worker=1,
        rollout_fragment_length=FRAGMENT,
        sample_timeout_s=5.0,
        seed=0,
    )
    workers = WorkerSet(config, PGPolicy)
    try:
        rollouts = parallel_rollouts(workers, mode="bulk_sync")
        counters = rollouts.metrics.counters
        first = next(rollouts)  # worker 2 blocks: the round closes at its deadline without it
        assert worker_ids(first) == [1] and first.count == FRAGMENT
        assert counters[keys.NUM_LATE_SAMPLES] == 1
        assert counters[keys.NUM_ENV_STEPS_SAMPLED] == FRAGMENT
        second = next(rollouts)  # still blocked: not asked again, not counted late again
        assert worker_ids(second) == [1]
        assert counters[keys.NUM_LATE_SAMPLES] == 1
        gate.touch()
        third = next(rollouts)  # worker 1's new batch and worker 2's late one
        assert worker_ids(third) == [1, 2] and third.count == 2 * FRAGMENT
        fourth = next(rollouts)  # one of each again: worker 2 was asked once more, not twice
        assert worker_ids(fourth) == [1, 2] and fourth.count == 2 * FRAGMENT
        assert counters[keys.NUM_LATE_SAMPLES] == 1
        assert counters[keys.NUM_ENV_STEPS_SAMPLED] == 6 * FRAGMENT
    finally:
        workers.stop()

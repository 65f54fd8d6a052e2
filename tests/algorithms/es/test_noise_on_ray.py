"""The shared noise table on Ray (issue 45): made once, on the driver, and read by every worker
process of the node from the object store (zero copy), never made or copied there."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from rlflow import flow
from rlflow.algorithms import get_algorithm
from rlflow.data import noise as noise_ops
from rlflow.workers import WorkerSet

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180)]


def _table_facts(worker: Any, key: str) -> tuple[int, bool, bool, int, float]:
    table = noise_ops.installed_noise(key)
    return (
        os.getpid(),
        bool(table.flags.writeable),
        bool(table.flags.owndata),
        noise_ops.noise_table_creations(),
        float(table[:1000].sum()),
    )


def test_one_table_per_node_read_in_place_by_every_worker(ray_backend: None) -> None:
    spec = get_algorithm("es")
    config = spec.config_cls(
        env="CartPole-v1",
        num_workers=2,
        noise_seed=911,
        noise_size=2_000_000,
        episodes_per_batch=4,
        train_batch_size=10,
    )
    before = noise_ops.noise_table_creations()
    workers = WorkerSet(config, spec.policy_cls)
    plan = spec.plan(workers, config)
    try:
        next(plan)
        facts = flow.get(
            [w.apply.remote(_table_facts, "911:2000000") for w in workers.remote_workers()]
        )
    finally:
        plan.close()
        workers.stop()
    assert noise_ops.noise_table_creations() == before + 1  # made once, on the driver
    expected = float(np.random.default_rng(911).standard_normal(1000, dtype=np.float32).sum())
    assert len({pid for pid, *_ in facts}) == 2 and os.getpid() not in {f[0] for f in facts}
    for _pid, writeable, owndata, created, head in facts:
        # A read-only view of the node's object store, not a copy the process owns, and no
        # table was made in the worker's process.
        assert not writeable and not owndata and created == 0
        assert head == expected

"""An elastic run (``min_workers`` < ``num_workers``) on a multi-node ``ray.cluster_utils.Cluster``.

The head node has 1 CPU, room for one of the run's three workers: the run starts with it, asks
Ray's autoscaler for the rest, grows to three when a 2-CPU node joins, shrinks to one when that
node is removed, and grows back to three when another joins; training goes on in every phase.
With ``-s`` it prints the worker counts per iteration and the seconds each phase took.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rlflow import Trainer
from rlflow.testing.cluster import connected_cluster

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def small_head() -> Iterator[Any]:
    """A cluster whose head node has 1 CPU, this process connected to it; the cluster. The
    ``PYTHONPATH`` and the SIGTERM handler it found (Ray's nodes set one) are back after it."""
    import ray

    if ray.is_initialized():
        pytest.skip("another Ray session is running in this process")
    with connected_cluster(__name__, 1) as cluster:
        yield cluster


def autoscaler_request() -> Any:
    """The bundles the cluster's autoscaler was last asked for (``request_resources``), as
    Ray's v1 autoscaler reads them from the GCS; None when nothing was asked."""
    from ray.autoscaler._private.constants import AUTOSCALER_RESOURCE_REQUEST_CHANNEL
    from ray.experimental.internal_kv import _internal_kv_get

    raw = _internal_kv_get(AUTOSCALER_RESOURCE_REQUEST_CHANNEL)
    return None if raw is None else json.loads(raw)


def train_until(trainer: Trainer, healthy: int, deadline_s: float) -> list[dict[str, Any]]:
    """Results until one reports ``healthy`` healthy workers (a node's death and a worker's
    start are noticed asynchronously: polled with a deadline)."""
    deadline = time.perf_counter() + deadline_s
    results = [trainer.train()]
    while results[-1]["num_healthy_workers"] != healthy:
        assert time.perf_counter() < deadline, results[-1]
        results.append(trainer.train())
    return results


def sampled(results: list[dict[str, Any]]) -> list[int]:
    return [r["num_env_steps_sampled"] for r in results]


def runs(results: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """``(healthy workers, iterations in a row with that many)`` over ``results``."""
    healthy = (r["num_healthy_workers"] for r in results)
    return [(count, len(list(run))) for count, run in itertools.groupby(healthy)]


def test_an_elastic_run_grows_shrinks_and_grows_back(small_head: Any) -> None:
    from ray.autoscaler.v2.utils import is_autoscaler_v2

    cluster = small_head
    config = {"train_batch_size": 200, "sgd_minibatch_size": 100, "num_sgd_iter": 2}
    phases: dict[str, list[dict[str, Any]]] = {}
    seconds: dict[str, float] = {}
    with Trainer(
        "ppo", env="CartPole-v1", num_workers=3, min_workers=1, seed=0, backend="ray",
        rollout_fragment_length=25, num_envs_per_worker=2, **config,
    ) as trainer:  # fmt: skip
        if not is_autoscaler_v2():  # the v1 autoscaler's request is readable in the GCS
            assert autoscaler_request() == [{"CPU": 1.0}] * 3
        phases["start: 1 CPU"] = [trainer.train(), trainer.train()]

        node = cluster.add_node(num_cpus=2)
        start = time.perf_counter()
        phases["node of 2 CPUs added"] = train_until(trainer, healthy=3, deadline_s=90)
        seconds["grow"] = time.perf_counter() - start
        phases["node of 2 CPUs added"] += [trainer.train()]

        cluster.remove_node(node)
        start = time.perf_counter()
        phases["node removed"] = train_until(trainer, healthy=1, deadline_s=120)
        seconds["shrink"] = time.perf_counter() - start
        phases["node removed"] += [trainer.train(), trainer.train()]

        cluster.add_node(num_cpus=2)
        start = time.perf_counter()
        phases["another node added"] = train_until(trainer, healthy=3, deadline_s=90)
        seconds["grow back"] = time.perf_counter() - start
        phases["another node added"] += [trainer.train()]
    if not is_autoscaler_v2():
        assert autoscaler_request() == []  # withdrawn when the run stopped

    counts = {name: [r["num_healthy_workers"] for r in rs] for name, rs in phases.items()}
    shapes = {name: runs(rs) for name, rs in phases.items()}
    ends = {name: rs[-1]["num_env_steps_sampled"] for name, rs in phases.items()}
    waits = {name: round(s, 1) for name, s in seconds.items()}
    print(
        f"\nMEASURE elastic run, (healthy workers, iterations) per phase: {shapes}; seconds to "
        f"reach the count after the node change: {waits}; env steps sampled at each phase's "
        f"end: {ends}"
    )
    results = [r for rs in phases.values() for r in rs]
    assert all(r["num_target_workers"] == 3 for r in results)
    assert counts["start: 1 CPU"] == [1, 1]
    assert counts["node of 2 CPUs added"][-2:] == [3, 3]
    assert counts["node removed"][-3:] == [1, 1, 1]
    assert counts["another node added"][-2:] == [3, 3]
    # Training went on in every phase, and the counters never went back.
    assert sampled(results) == sorted(set(sampled(results)))
    for name, rs in phases.items():
        assert all(r["num_env_steps_trained_this_iter"] > 0 for r in rs), name
    # Workers 2 and 3 started late (not restarts), then were lost with their node and recreated.
    assert results[-1]["num_worker_restarts"] == 2

"""``placement_strategy`` on a 2-node ``ray.cluster_utils.Cluster``: PACK keeps both workers on
one node, STRICT_SPREAD puts them on different nodes (plain SPREAD is best effort: on this
local 2-node cluster it put both on one node)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from rlflow import flow
from rlflow.algorithms import PGConfig
from rlflow.policy import PGPolicy
from rlflow.testing.workers import counting_workers

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[None]:
    """A cluster of two nodes with 2 CPUs each, this process connected to it."""
    import ray
    import ray.cloudpickle
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        pytest.skip("another Ray session is running in this process")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "src")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (src, os.environ.get("PYTHONPATH", "")) if p
    )
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.add_node(num_cpus=2)
    try:
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        flow.init(backend="ray")
        yield
    finally:
        flow.shutdown()
        ray.shutdown()
        cluster.shutdown()


def node_of(worker: Any) -> str:
    """On the actor: the id of the node it runs on."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


@pytest.mark.parametrize(("strategy", "num_nodes"), [("PACK", 1), ("STRICT_SPREAD", 2)])
def test_the_strategy_decides_the_nodes(two_nodes: None, strategy: str, num_nodes: int) -> None:
    workers = counting_workers(PGConfig, PGPolicy, num_workers=2, placement_strategy=strategy)
    try:
        nodes = flow.get([w.apply.remote(node_of) for w in workers.remote_workers()], timeout=90)
        assert len(set(nodes)) == num_nodes, nodes
    finally:
        workers.stop()

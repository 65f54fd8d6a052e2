"""A multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``) with this process
connected to it and rlflow's Ray backend on it, for tests of placement, lost nodes and elastic
runs."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rlflow import flow

__all__ = ["connected_cluster"]


@contextmanager
def connected_cluster(module: str, head_cpus: int, *node_cpus: int) -> Iterator[Any]:
    """Start a cluster whose head has ``head_cpus`` CPUs and one more node per ``node_cpus``,
    connect this process and the Ray backend to it, and yield the cluster; all stopped after.

    The module named ``module`` (a test module: Ray's workers cannot import it) is pickled by
    value. Ray's workers import rlflow from the ``PYTHONPATH`` of this process's ``rlflow``; the
    ``PYTHONPATH`` and the SIGTERM handler found before (Ray's nodes set one) are back after.
    """
    import ray
    import ray.cloudpickle
    from ray.cluster_utils import Cluster

    ray.cloudpickle.register_pickle_by_value(sys.modules[module])  # type: ignore[no-untyped-call]
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sigterm = signal.getsignal(signal.SIGTERM)
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, path) if p)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": head_cpus})
    try:
        for cpus in node_cpus:
            cluster.add_node(num_cpus=cpus)
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        flow.init(backend="ray")
        yield cluster
    finally:
        try:
            flow.shutdown()
            ray.shutdown()
            cluster.shutdown()  # type: ignore[no-untyped-call]
        finally:
            signal.signal(signal.SIGTERM, sigterm)
            if path is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = path

"""Workers on a multi-node ``ray.cluster_utils.Cluster``.

``placement_strategy``: PACK keeps both workers on one node, STRICT_SPREAD puts them on different
nodes (plain SPREAD is best effort: on this local 2-node cluster it put both on one node). Node
loss: a run whose worker's node is removed goes on with the other worker, then gets its worker
back on a node added later (Ray re-places the lost bundle of the placement group there). With
``-s`` it prints the workers' nodes before and after, and the seconds each step took.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from rlflow import Trainer, flow
from rlflow.algorithms import PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.testing.cluster import connected_cluster
from rlflow.testing.workers import counting_workers

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[Any]:
    """A cluster of two nodes with 2 CPUs each, this process connected to it; the cluster. The
    ``PYTHONPATH`` and the SIGTERM handler it found (Ray's nodes set one) are back after it."""
    import ray

    if ray.is_initialized():
        pytest.skip("another Ray session is running in this process")
    with connected_cluster(__name__, 2, 2) as cluster:
        yield cluster


RELEASE_BOUND_S = 60.0
"""How long the cluster may take, on a loaded CI machine, to free the CPUs the test before held
(Ray kills actors and removes placement groups asynchronously)."""


@pytest.fixture(autouse=True)
def _idle_cluster(two_nodes: Any) -> None:
    """Each test starts with every CPU of the cluster free, whichever test ran before it: PACK
    is a soft strategy, and bundles that do not fit on one node (its CPUs still held by the
    workers of a STRICT_SPREAD test just stopped) go to another."""
    import ray

    deadline = time.monotonic() + RELEASE_BOUND_S
    while ray.available_resources().get("CPU", 0.0) < ray.cluster_resources().get("CPU", 0.0):
        assert time.monotonic() < deadline, (ray.available_resources(), ray.cluster_resources())
        time.sleep(0.1)


def node_of(worker: Any) -> str:
    """On the actor: the id of the node it runs on."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


@pytest.mark.parametrize(("strategy", "num_nodes"), [("PACK", 1), ("STRICT_SPREAD", 2)])
def test_the_strategy_decides_the_nodes(two_nodes: Any, strategy: str, num_nodes: int) -> None:
    workers = counting_workers(PGConfig, PGPolicy, num_workers=2, placement_strategy=strategy)
    try:
        nodes = flow.get([w.apply.remote(node_of) for w in workers.remote_workers()], timeout=90)
        assert len(set(nodes)) == num_nodes, nodes
    finally:
        workers.stop()


def nodes_of(trainer: Trainer) -> list[str]:
    """The node of each remote worker of ``trainer``, in index order."""
    handles = trainer.workers.remote_workers()
    return [str(n) for n in flow.get([w.apply.remote(node_of) for w in handles], timeout=90)]


def train_until(trainer: Trainer, healthy: int, deadline_s: float) -> list[dict[str, Any]]:
    """Results until one reports ``healthy`` healthy workers (Ray's node-death detection and the
    new actor's start are asynchronous: polled with a deadline)."""
    deadline = time.perf_counter() + deadline_s
    results = [trainer.train()]
    while results[-1]["num_healthy_workers"] != healthy:
        assert time.perf_counter() < deadline, results[-1]
        results.append(trainer.train())
    return results


def test_a_run_survives_node_loss_and_takes_back_a_new_node(two_nodes: Any) -> None:
    """It removes the second node (2 CPUs) and adds one of 1 CPU: the strategy tests, before or
    after it, still find what they need (PACK: 2 CPUs on one node, STRICT_SPREAD: 1 CPU on each
    of two nodes)."""
    cluster = two_nodes
    head = str(cluster.head_node.node_id)
    config = {"train_batch_size": 200, "sgd_minibatch_size": 100, "num_sgd_iter": 2}
    with Trainer(
        "ppo", env="CartPole-v1", num_workers=2, seed=0, backend="ray",
        rollout_fragment_length=25, num_envs_per_worker=2,
        placement_strategy="STRICT_SPREAD", **config,
    ) as trainer:  # fmt: skip
        results = [trainer.train(), trainer.train()]
        before = nodes_of(trainer)
        assert sorted(before) == sorted([head, str(cluster.list_all_nodes()[1].node_id)])
        lost = before.index(next(n for n in before if n != head))
        [gone] = [n for n in cluster.list_all_nodes() if str(n.node_id) == before[lost]]

        removed_at = time.perf_counter()
        cluster.remove_node(gone)
        degraded = train_until(trainer, healthy=1, deadline_s=120)
        degraded += [trainer.train() for _ in range(3)]  # the run goes on with one worker
        assert [r["num_healthy_workers"] for r in degraded[-3:]] == [1, 1, 1]
        assert all(r["num_env_steps_sampled_this_iter"] >= 200 for r in degraded[-3:])
        degraded_s = time.perf_counter() - removed_at

        new_node = cluster.add_node(num_cpus=1)
        added_at = time.perf_counter()
        recovered = train_until(trainer, healthy=2, deadline_s=150)
        recovered_s = time.perf_counter() - added_at
        after = nodes_of(trainer)
        assert after[1 - lost] == before[1 - lost]  # the surviving worker stayed
        assert after[lost] == str(new_node.node_id)
        results += degraded + recovered + [trainer.train()]
        sampled = [r["num_env_steps_sampled"] for r in results]
        assert sampled == sorted(set(sampled))  # strictly increasing: counters never go back
        assert results[-1]["num_worker_restarts"] == 1
        assert results[-1]["num_healthy_workers"] == 2
        short = [[n[:8] for n in nodes] for nodes in (before, after)]
        print(
            f"\nMEASURE node loss: workers on nodes {short[0]} (head {head[:8]}); node of worker "
            f"{lost + 1} removed; {len(degraded)} iterations with 1 healthy worker over "
            f"{degraded_s:.1f}s; node added: both healthy after {recovered_s:.1f}s "
            f"({len(recovered)} iterations); workers now on {short[1]}"
        )

"""Per-worker resources and placement: config rules, the placement group of the remote workers
on Ray (one bundle per worker, kept by a recreated worker, removed on stop), and the local
backend ignoring it all."""

from __future__ import annotations

from typing import Any

import pytest

from rlflow import flow
from rlflow.algorithms import PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.errors import ConfigError, ConfigTypeError
from rlflow.testing.workers import counting_workers
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(180)


def placement(worker: Any) -> tuple[str | None, dict[str, float]]:
    """On the actor: its placement group id (hex) and the resources assigned to it."""
    import ray

    context = ray.get_runtime_context()
    return context.get_placement_group_id(), dict(context.get_assigned_resources())


def placements(workers: WorkerSet) -> list[tuple[str | None, dict[str, float]]]:
    return flow.get([w.apply.remote(placement) for w in workers.remote_workers()])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"placement_strategy": "pack"}, ConfigError, r"PGConfig\.placement_strategy='pack'"),
        ({"num_cpus_per_worker": -1}, ConfigError, r"PGConfig\.num_cpus_per_worker=-1"),
        ({"num_cpus_per_worker": "1"}, ConfigTypeError, r"PGConfig\.num_cpus_per_worker"),
        ({"custom_resources_per_worker": {"CPU": 1}}, ConfigError, "not one of"),
        ({"custom_resources_per_worker": {"a": -1}}, ConfigError, r"\['a'\]=-1"),
        ({"custom_resources_per_worker": [1]}, ConfigTypeError, "custom_resources_per_worker"),
    ],
)
def test_bad_resources_are_config_errors(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    # Raised by the config itself: before any WorkerSet (or actor) exists.
    with pytest.raises(error, match=match):
        PGConfig(**kwargs)


def test_worker_bundle_leaves_out_zero_amounts() -> None:
    config = PGConfig(num_cpus_per_worker=0, custom_resources_per_worker={"a": 2, "b": 0})
    assert config.worker_bundle() == {"a": 2.0}
    assert PGConfig().worker_bundle() == {"CPU": 1.0}


def test_the_local_backend_ignores_resources(local_backend: None) -> None:
    workers = counting_workers(
        PGConfig, PGPolicy, custom_resources_per_worker={"no_such_resource": 4}
    )
    try:
        assert workers.placement_group() is None
        assert flow.get(workers.remote_workers()[0].sample.remote()).count == 4
    finally:
        workers.stop()


@pytest.mark.ray
def test_workers_land_in_their_bundles_and_a_recreated_one_goes_back(ray_backend: None) -> None:
    import ray
    from ray.util import placement_group_table

    workers = counting_workers(PGConfig, PGPolicy, placement_strategy="SPREAD")
    try:
        group = workers.placement_group()
        table = placement_group_table(group)
        assert table["strategy"] == "SPREAD" and table["state"] == "CREATED"
        assert list(table["bundles"].values()) == [{"CPU": 1.0}, {"CPU": 1.0}]
        found = placements(workers)
        assert [pg for pg, _ in found] == [group.id.hex()] * 2
        assert all(res == {"CPU": 1.0} for _, res in found)
        ray.kill(workers.remote_workers()[1], no_restart=True)
        new = workers.recreate_worker(2, dead=workers.remote_workers()[1])
        if new is None:  # worker 1 is healthy, so nobody waited: wait for the start now
            flow.get(workers._starting[2][1])  # the ping of the start in progress
            new = workers.recreate_worker(2)
        assert flow.get(new.apply.remote(placement))[0] == group.id.hex()
    finally:
        workers.stop()
    assert placement_group_table(group)["state"] == "REMOVED"


@pytest.mark.ray
def test_half_a_cpu_per_worker_starts_four_workers_on_two_cpus(ray_backend: None) -> None:
    workers = counting_workers(
        PGPolicy.config_class, PGPolicy, num_workers=4, num_cpus_per_worker=0.5
    )
    try:
        assert (
            flow.get([w.ping.remote() for w in workers.remote_workers()], timeout=120) == ["ok"] * 4
        )
        assert all(res == {"CPU": 0.5} for _, res in placements(workers))
    finally:
        workers.stop()


@pytest.mark.ray
def test_a_group_that_cannot_be_placed_is_a_config_error(ray_backend: None) -> None:
    config = PGConfig(num_workers=2, num_cpus_per_worker=2, env="CartPole-v1")
    with pytest.raises(ConfigError, match="could not be placed"):
        WorkerSet(config, PGPolicy, start_timeout_s=1.0)

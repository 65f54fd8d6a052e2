"""Per-worker resources and placement: config rules, the placement group of the remote workers
on Ray (one bundle per worker, kept by a recreated worker, removed on stop), and the local
backend ignoring it all."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rlflow import flow
from rlflow.algorithms import PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.config.resources import bundles_that_fit, check_cluster_fits
from rlflow.errors import ConfigError, ConfigTypeError
from rlflow.testing.workers import COUNTING_DEFAULTS, counting_workers
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
def test_workers_the_cluster_cannot_hold_are_refused_at_once(
    ray_backend: None, caplog: pytest.LogCaptureFixture
) -> None:
    nodes = flow.cluster_nodes()
    assert nodes is not None and sum(n.get("CPU", 0.0) for n in nodes) == 2.0  # the session's
    config = PGConfig(num_workers=16, env="CartPole-v1")
    start = time.monotonic()
    with pytest.raises(
        ConfigError, match=r"num_workers=16 workers of \{'CPU': 1.0\} each .* holds 2 "
    ):
        WorkerSet(config, PGPolicy, start_timeout_s=60.0)
    assert time.monotonic() - start < 5.0  # no placement wait
    # An autoscaling cluster may grow: cluster_wait_s waits (with a progress line), then refuses
    config = PGConfig(num_workers=2, num_cpus_per_worker=2, env="CartPole-v1", cluster_wait_s=1.5)
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"do not fit the Ray cluster"):
        WorkerSet(config, PGPolicy, start_timeout_s=60.0)
    assert time.monotonic() - start >= 1.5
    assert "waiting for the Ray cluster to hold 2 workers" in caplog.text


def test_the_bundles_a_cluster_holds_follow_the_strategy() -> None:
    nodes = [{"CPU": 4.0, "GPU": 1.0}, {"CPU": 2.0}, {"CPU": 0.5}]
    cpu = {"CPU": 1.0}
    assert bundles_that_fit(cpu, nodes, "PACK") == bundles_that_fit(cpu, nodes, "SPREAD") == 6
    assert bundles_that_fit(cpu, nodes, "STRICT_PACK") == 4
    assert bundles_that_fit(cpu, nodes, "STRICT_SPREAD") == 2
    assert bundles_that_fit({"CPU": 1.0, "GPU": 0.25}, nodes, "PACK") == 4
    assert bundles_that_fit({"custom": 1.0}, nodes, "PACK") == 0
    config = PGConfig(num_workers=3, placement_strategy="STRICT_SPREAD")
    with pytest.raises(ConfigError, match=r"placement_strategy='STRICT_SPREAD'\) do not fit"):
        check_cluster_fits(config, nodes)
    check_cluster_fits(config.replace(num_workers=2), nodes)  # fits: no error


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_workers": 0}, r"PGConfig\.min_workers=0 .*>= 1"),
        ({"min_workers": 3}, r"PGConfig\.min_workers=3 must be <= num_workers=2"),
        ({"min_workers": 1, "num_workers": 0}, r"min_workers=1 must be <= num_workers=0"),
        (
            {"min_workers": 1, "placement_strategy": "STRICT_SPREAD"},
            r"min_workers=1 < num_workers=2 .* placement_strategy='STRICT_SPREAD' cannot be kept",
        ),
    ],
)
def test_bad_min_workers_are_config_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        PGConfig(**kwargs)


def test_min_workers_of_all_workers_is_todays_run() -> None:
    config = PGConfig(min_workers=2, placement_strategy="STRICT_SPREAD")  # all: not elastic
    assert not config.elastic() and config.workers_to_start() == 2
    assert PGConfig(min_workers=1).elastic() and PGConfig(min_workers=1).workers_to_start() == 1
    assert not PGConfig().elastic() and PGConfig().workers_to_start() == 2


@pytest.mark.parametrize("algorithm", ["ddppo", "alpha_zero"])
def test_algorithms_of_a_fixed_worker_count_refuse_min_workers(algorithm: str) -> None:
    from rlflow.algorithms import ALGORITHMS

    config_cls = ALGORITHMS[algorithm].config_cls
    workers = max(2, config_cls().num_workers)
    with pytest.raises(ConfigError, match=r"min_workers=1 must be None or num_workers="):
        config_cls(num_workers=workers, min_workers=1)


def test_an_elastic_run_needs_room_for_min_workers_only() -> None:
    nodes = [{"CPU": 1.0}]
    config = PGConfig(num_workers=3, min_workers=1)
    check_cluster_fits(config, nodes)  # one fits now: the run starts, the others wait
    with pytest.raises(
        ConfigError, match=r"min_workers=2 workers of .* holds 1 .*lower min_workers"
    ):
        check_cluster_fits(config.replace(min_workers=2), nodes)


def test_the_local_backend_starts_every_worker_of_an_elastic_run(local_backend: None) -> None:
    workers = counting_workers(PGConfig, PGPolicy, num_workers=3, min_workers=1)
    try:
        assert workers.num_healthy_workers() == workers.num_target_workers() == 3
        assert workers.grow() == []
    finally:
        workers.stop()


@pytest.mark.ray
def test_an_elastic_run_starts_the_workers_that_fit_and_waits_for_the_rest(
    ray_backend: None,
) -> None:
    import ray

    from rlflow.errors import ActorDiedError

    deadline = time.monotonic() + 60  # the CPUs of the tests before are freed asynchronously
    while ray.available_resources().get("CPU", 0.0) < 2.0:
        assert time.monotonic() < deadline, ray.available_resources()
        time.sleep(0.1)
    # The session has 2 CPUs: two of the three workers start, the third waits for room.
    workers = counting_workers(PGConfig, PGPolicy, num_workers=3, min_workers=1)
    try:
        assert workers.placement_group() is None  # elastic: each worker reserves its own
        assert (workers.num_healthy_workers(), workers.num_target_workers()) == (2, 3)
        healthy, missing = workers.healthy_workers(), workers.remote_workers()[2]
        assert flow.get([w.ping.remote() for w in healthy], timeout=60) == ["ok"] * 2
        with pytest.raises(ActorDiedError):  # its slot holds an absent actor: read as dead
            flow.get(missing.ping.remote(), timeout=60)
        assert workers.grow() == []  # no room yet, and nobody waits
        flow.kill(healthy[0])  # room: the third worker starts where the first ran
        workers.recreate_worker(1, dead=healthy[0])  # the first's replacement queues now
        deadline = time.monotonic() + 60
        while 3 not in workers.grow():
            assert time.monotonic() < deadline, "worker 3 never started"
            time.sleep(0.2)
        assert workers.num_restarts == 0  # a late start is not a restart
        assert flow.get(workers.remote_workers()[2].sample.remote(), timeout=60).count == 4
    finally:
        workers.stop()


@pytest.mark.ray
def test_an_elastic_run_refuses_to_start_with_fewer_than_min_workers(ray_backend: None) -> None:
    import ray
    from ray.util import placement_group, remove_placement_group

    # Another job holds the session's 2 CPUs: they exist (check_cluster_fits lets the run
    # start), but no worker can run within the start timeout.
    held = placement_group([{"CPU": 2.0}])
    assert held.wait(timeout_seconds=60)
    try:
        config = PGConfig(**{**COUNTING_DEFAULTS, "num_workers": 2, "min_workers": 1})
        start = time.monotonic()
        with pytest.raises(ConfigError, match=r"min_workers=1 remote workers .* but 0 of "):
            WorkerSet(config, PGPolicy, start_timeout_s=3.0)
        assert time.monotonic() - start < 30.0
    finally:
        remove_placement_group(held)
    # The run's actors were killed with the error: none takes the CPUs once they are free.
    deadline = time.monotonic() + 60
    while ray.available_resources().get("CPU", 0.0) < 2.0:
        assert time.monotonic() < deadline, ray.available_resources()
        time.sleep(0.1)
    time.sleep(2.0)
    assert ray.available_resources().get("CPU", 0.0) == 2.0

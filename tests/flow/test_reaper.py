"""A local Ray that rlflow starts never outlives its driver (`rlflow.flow.backend.reaper`):
not after a SIGKILL right after ``ray.init``, and not after a clean end whose ``ray.shutdown``
left something behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlflow.flow.backend.reaper import (
    GRACE_S,
    MONITOR_SCRIPTS,
    SESSION_ENV,
    command_line,
    descendants,
    session_processes,
    stop_monitor,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180)]

BOUND_S = 20.0
"""How long a session's processes may outlive its driver on a loaded CI machine."""

DRIVER = textwrap.dedent(
    """
    import sys, time
    from rlflow.flow.backend.reaper import end_session, start_local_ray
    start_local_ray(num_cpus=1, include_dashboard=False, log_to_driver=False)
    print("up", flush=True)
    if sys.argv[1] == "clean":
        import ray
        ray.shutdown()
        end_session()
        print("ended", flush=True)
    time.sleep(600)
    """
)


MONITOR_DRIVER = textwrap.dedent(
    """
    import sys, time
    import ray
    from rlflow import flow
    from rlflow.flow.backend.reaper import stop_monitor
    print(stop_monitor(), flush=True)  # no session yet
    flow.init("ray", num_cpus=1, include_dashboard=False, log_to_driver=False)
    print("up", flush=True)
    real_shutdown = ray.shutdown
    def shutdown(*args, **kwargs):
        print("ray.shutdown", flush=True)
        sys.stdin.readline()
        real_shutdown(*args, **kwargs)
    ray.shutdown = shutdown
    sys.stdin.readline()
    flow.shutdown()
    print("ended", flush=True)
    time.sleep(600)
    """
)


def _driver(mode: str, program: str = DRIVER) -> subprocess.Popen[str]:
    src = str(Path(__file__).parents[2] / "src")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        [sys.executable, "-c", program, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _tree(root: int) -> dict[int, str]:
    """The processes below ``root`` now: pid -> command line."""
    return {p: c for p in descendants(root) if (c := command_line(p)) is not None}


def _alive(pids: dict[int, str]) -> dict[int, str]:
    out = {}
    for pid, cmdline in pids.items():
        try:
            state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out[pid] = cmdline[:100]
    return out


def _gone_within(pids: dict[int, str], bound_s: float) -> dict[int, str]:
    deadline = time.monotonic() + bound_s
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _alive(pids)


def test_a_driver_killed_right_after_ray_init_leaves_nothing_behind() -> None:
    driver = _driver("kill")
    assert driver.stdout is not None and driver.stdout.readline() == "up\n"
    started = _tree(driver.pid)
    names = " ".join(started.values())
    assert "raylet" in names and "reaper.py" in names, names
    assert len(session_processes(f"{driver.pid}-", env=SESSION_ENV)) >= 2  # gcs, raylet, ...
    driver.kill()
    driver.wait()
    assert _gone_within(started, BOUND_S) == {}


def test_a_clean_end_lets_the_reaper_sweep_and_exit_while_the_driver_lives() -> None:
    driver = _driver("clean")
    try:
        assert driver.stdout is not None and driver.stdout.readline() == "up\n"
        started = _tree(driver.pid)
        assert driver.stdout.readline() == "ended\n"
        assert driver.poll() is None
        assert _gone_within(started, GRACE_S + BOUND_S) == {}
    finally:
        driver.kill()
        driver.wait()


def test_flow_shutdown_kills_its_sessions_autoscaler_monitor_before_ray_shutdown() -> None:
    """`flow.shutdown` SIGKILLs the session's monitor (`stop_monitor`) before ``ray.shutdown()``
    (which would wait 1 s for it), and only the monitor; the session still ends with nothing
    left behind, and without a session of this process `stop_monitor` kills nothing."""
    driver = _driver("", MONITOR_DRIVER)
    try:
        assert driver.stdin is not None and driver.stdout is not None
        assert driver.stdout.readline() == "[]\n"
        assert driver.stdout.readline() == "up\n"
        started = _tree(driver.pid)
        monitors = [p for p, c in started.items() if any(s in c for s in MONITOR_SCRIPTS)]
        core = [p for p, c in started.items() if "raylet/raylet" in c or "gcs_server" in c]
        assert len(monitors) == 1 and len(core) == 2, "\n".join(started.values())
        driver.stdin.write("go\n")  # flow.shutdown()
        driver.stdin.flush()
        assert driver.stdout.readline() == "ray.shutdown\n"
        assert _gone_within({monitors[0]: ""}, BOUND_S) == {}  # a SIGKILL lands in a moment
        assert sorted(_alive({p: started[p] for p in core})) == sorted(core)
        driver.stdin.write("go\n")
        driver.stdin.flush()
        assert driver.stdout.readline() == "ended\n"
        assert _gone_within(started, GRACE_S + BOUND_S) == {}
    finally:
        driver.kill()
        driver.wait()


def test_stop_monitor_without_a_session_of_this_process_kills_nothing() -> None:
    assert stop_monitor() == []


def test_flow_init_starts_a_ray_of_its_own_unless_ray_address_names_a_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `ray start` left a cluster running here (another job): Ray's own ray.init() would join
    # it and refuse num_cpus; a `ray job submit` entrypoint has RAY_ADDRESS and joins.
    import ray

    from rlflow.flow import backend

    for name in ("_backend", "_started_ray", "_session_lost"):
        monkeypatch.setattr(backend, name, getattr(backend, name))  # put back after the test
    calls: list[tuple[str, dict[str, object]]] = []
    monkeypatch.setattr(backend, "start_local_ray", lambda **kw: calls.append(("own", kw)))
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(("join", kw)))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    backend.init("ray", num_cpus=1)
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    backend.init("ray")
    assert calls == [
        ("own", {"num_cpus": 1, "include_dashboard": False, "address": "local"}),
        ("join", {"include_dashboard": False, "address": "ray://head:10001"}),
    ]


OWN_RAY_DRIVER = textwrap.dedent(
    """
    import ray
    from rlflow import flow
    flow.init("ray", num_cpus=1, include_dashboard=False, log_to_driver=False)
    print(ray.get_runtime_context().gcs_address, flush=True)
    flow.shutdown()
    """
)


def test_flow_init_without_an_address_starts_its_own_ray_beside_a_running_cluster() -> None:
    """Ray's ``ray.init()`` joins the cluster that ``/tmp/ray/ray_current_cluster`` names (the
    last ``ray start`` or ``ray.cluster_utils.Cluster`` on the machine, whoever started it);
    ``flow.init("ray")`` without ``address`` or ``RAY_ADDRESS`` starts a Ray of its own. Found
    by ``benchmarks/soak.py``: an ``rlflow train`` without ``--address`` joined the soak's
    cluster, whose chaos thread then killed its rollout workers."""
    import signal

    from ray.cluster_utils import Cluster

    sigterm = signal.getsignal(signal.SIGTERM)  # a Ray node sets its own
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        driver = _driver("own", OWN_RAY_DRIVER)
        out, _ = driver.communicate(timeout=120)
    finally:
        cluster.shutdown()
        signal.signal(signal.SIGTERM, sigterm)
    assert driver.returncode == 0, out
    assert out.strip() and out.strip() != cluster.address, (out, cluster.address)

"""Shared fixtures: the flow backends (local, and a module-scoped Ray session); and the check
that the test session leaves no process behind.

Every process the tests start (Ray's, a CLI run's, anything) inherits `TEST_SESSION_ENV`; when
the session ends, `pytest_sessionfinish` waits up to `LEFTOVER_WAIT_S` for them to exit, then
kills the ones left, lists them and fails the run. A reaper of a Ray session
(`rlflow.flow.backend.reaper`) is left alone: it ends with this process and sweeps its session.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from rlflow import flow
from rlflow.flow.backend.reaper import (
    command_line,
    end_session,
    session_processes,
    start_local_ray,
    stop_monitor,
)

TEST_SESSION_ENV = "RLFLOW_TEST_SESSION"
"""Marks every process this test session starts (set here, at import, so all inherit it)."""
LEFTOVER_WAIT_S = 30.0
"""How long the processes the tests started get to exit after the last test (Ray's shut down
asynchronously), on a loaded machine."""

_TEST_SESSION = os.environ.setdefault(TEST_SESSION_ENV, f"{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _leftovers() -> dict[int, str]:
    """The processes of this test session still running (not this one, not a reaper)."""
    found = {}
    for pid in session_processes(_TEST_SESSION, env=TEST_SESSION_ENV):
        cmdline = command_line(pid)
        if cmdline is not None and "rlflow/flow/backend/reaper.py" not in cmdline:
            found[pid] = cmdline
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a process the tests started outlives them (see the module docstring)."""
    if (
        os.environ.get(TEST_SESSION_ENV) != _TEST_SESSION
        or str(os.getpid()) != (_TEST_SESSION.split("-")[0])
    ):
        return  # a nested pytest (a test running pytest): its parent checks
    deadline = time.monotonic() + LEFTOVER_WAIT_S
    left = _leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _leftovers()
    if not left:
        return
    for pid in left:
        with contextlib.suppress(OSError):  # gone since
            os.kill(pid, signal.SIGKILL)
    listing = "\n".join(f"  {pid}: {cmdline[:160]}" for pid, cmdline in sorted(left.items()))
    print(
        f"\nFAILED: {len(left)} process(es) started by the tests were still running "
        f"{LEFTOVER_WAIT_S:g} s after the last test (now killed):\n{listing}",
        file=sys.stderr,
    )
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="module")
def ray_session(request: pytest.FixtureRequest) -> Iterator[None]:
    """One Ray session per test module (2 CPUs, no dashboard), shut down after the module.

    The test module is registered to be pickled by value, so functions and classes defined in it
    reach Ray workers, which cannot import test modules.
    """
    import ray
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[request.module.__name__])
    started = False
    if not ray.is_initialized():
        src = os.path.join(os.path.dirname(os.path.dirname(__file__)), "src")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (src, os.environ.get("PYTHONPATH", "")) if p
        )
        # Marked, with a reaper: its processes end with this one (rlflow.flow.backend.reaper).
        start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
        started = True
    yield
    flow.shutdown()
    if started:
        stop_monitor()  # as flow.shutdown does: ray.shutdown() would wait 1 s for it
        ray.shutdown()
        end_session()


@pytest.fixture
def ray_backend(ray_session: None) -> Iterator[None]:
    """The Ray backend, on this module's Ray session."""
    flow.init(backend="ray")
    yield


@pytest.fixture
def local_backend() -> Iterator[None]:
    """The local backend (actors are plain objects in this process)."""
    flow.init(backend="local")
    yield


@pytest.fixture(params=["local", pytest.param("ray", marks=pytest.mark.ray)])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test on both backends."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    flow.init(backend=request.param)
    yield request.param

"""Shared fixtures: the flow backends (local, and a module-scoped Ray session); what each test
changes in this process put back after it; and the check that the test session leaves no process
behind.

Tests run in any order (``-p random_order --random-order-bucket=global`` shuffles them), so
none may find what an earlier one left in the process. After every test `_process_state` stops
the learner threads still running (`rlflow.ops.learner_thread.stop_all_learner_threads`), ends
the flow backend (`rlflow.flow.shutdown`: a Ray the test started through ``flow.init`` stops,
the module's Ray session stays), and puts back the `ProcessState` it started with: the handlers of
`STOP_SIGNALS` (Ray Tune's sweep leaves its SIGINT handler, ``ray.init`` its SIGTERM one), the
global RNGs, and torch's settings. A module-scoped fixture puts back what it changes itself
(`ray_session`: ``PYTHONPATH`` and the `ProcessState`). What libraries set once, at import or
at their first use (Ray's and PettingZoo's environment variables, loggers, ``sys.excepthook``),
stays.

Every process the tests start (Ray's, a CLI run's, anything) inherits `TEST_SESSION_ENV`; when
the session ends, `pytest_sessionfinish` waits up to `LEFTOVER_WAIT_S` for them to exit, then
kills the ones left, lists them and fails the run. A reaper of a Ray session
(`rlflow.flow.backend.reaper`) is left alone: it ends with this process and sweeps its session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
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
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
"""This checkout's ``src``, which Ray's worker processes import rlflow from."""
LEFTOVER_WAIT_S = 30.0
"""How long the processes the tests started get to exit after the last test (Ray's shut down
asynchronously), on a loaded machine."""

_TEST_SESSION = os.environ.setdefault(TEST_SESSION_ENV, f"{os.getpid()}-{uuid.uuid4().hex[:8]}")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
"""The signals whose handlers code under test sets in this process (the CLI's `StopSignals`,
``ray.init``, Ray Tune); each test starts with the handlers the one before it started with."""


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


@dataclasses.dataclass(frozen=True)
class ProcessState:
    """What code under test changes in this process, captured to be put back: the handlers of
    `STOP_SIGNALS`; the global RNGs of `random` and NumPy; torch's RNG, thread count (a policy
    sets ``num_torch_threads`` process-wide), default dtype and grad mode, once torch is
    imported."""

    handlers: dict[signal.Signals, Any]
    rngs: tuple[Any, Any]
    torch: tuple[Any, ...] | None

    @classmethod
    def capture(cls) -> ProcessState:
        """The state now."""
        torch = sys.modules.get("torch")
        return cls(
            handlers={sig: signal.getsignal(sig) for sig in STOP_SIGNALS},
            rngs=(random.getstate(), np.random.get_state()),
            torch=None
            if torch is None
            else (
                torch.get_num_threads(),
                torch.get_default_dtype(),
                torch.is_grad_enabled(),
                torch.get_rng_state(),
            ),
        )

    def restore(self) -> None:
        """Put the captured state back.

        Each handler is installed again, changed or not: Ray's shutdown resets the C-level
        SIGTERM action under a Python handler that stays registered, and this puts the two back
        in step. A handler Python did not install reads as None and is left as it is.
        """
        for sig, handler in self.handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
        random.setstate(self.rngs[0])
        np.random.set_state(self.rngs[1])
        if self.torch is not None:
            import torch

            threads, dtype, grad, rng = self.torch
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)
            torch.set_default_dtype(dtype)
            torch.set_grad_enabled(grad)
            torch.set_rng_state(rng)


@pytest.fixture(autouse=True)
def _process_state() -> Iterator[None]:
    """Put back, after each test, what it changed in this process (see the module docstring)."""
    state = ProcessState.capture()
    yield
    learners = sys.modules.get("rlflow.ops.learner_thread")
    if learners is not None:  # imported: a test may have started learner threads
        learners.stop_all_learner_threads()
    flow.shutdown()
    state.restore()


@pytest.fixture(scope="module")
def ray_session(request: pytest.FixtureRequest) -> Iterator[None]:
    """One Ray session of its own per test module (2 CPUs, no dashboard), shut down after the
    module; the ``PYTHONPATH`` and `ProcessState` it found are back after it (``ray.init`` sets
    a SIGTERM handler).

    ``address="local"``: a new Ray even where another one runs on this machine (Ray would join
    the one named by ``RAY_ADDRESS`` or ``/tmp/ray/ray_current_cluster``, which a
    ``ray.cluster_utils.Cluster`` of another test run writes).

    The test module is registered to be pickled by value, so functions and classes defined in it
    reach Ray workers, which cannot import test modules.
    """
    import ray
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[request.module.__name__])
    state = ProcessState.capture()
    started = False
    try:
        with pytest.MonkeyPatch.context() as env:
            if not ray.is_initialized():
                env.setenv("PYTHONPATH", SRC, prepend=os.pathsep)  # Ray's workers import rlflow
                # Marked, with a reaper: its processes end with this one (flow.backend.reaper).
                start_local_ray(
                    address="local", num_cpus=2, include_dashboard=False, log_to_driver=False
                )
                started = True
            yield
            flow.shutdown()
            if started:
                stop_monitor()  # as flow.shutdown does: ray.shutdown() would wait 1 s for it
                ray.shutdown()
                end_session()
    finally:
        state.restore()


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

"""Shared fixtures: the flow backends (local, and a module-scoped Ray session)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from rlflow import flow


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
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        started = True
    yield
    flow.shutdown()
    if started:
        ray.shutdown()


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

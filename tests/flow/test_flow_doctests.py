"""The examples in the flow library's docstrings run (on the local backend).

Every module of ``rlflow.flow`` is found by walking the package, so a new module is covered
without editing this file.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest

import rlflow.flow
from rlflow import flow

pytestmark = pytest.mark.timeout(60)

_WALK = pkgutil.walk_packages(rlflow.flow.__path__, prefix="rlflow.flow.")
MODULES = ["rlflow.flow", *sorted(info.name for info in _WALK)]


def test_the_walk_finds_every_module_with_examples() -> None:
    expected = {"local", "merge", "metrics", "parallel", "gather", "worker", "backend"}
    assert {f"rlflow.flow.{name}" for name in expected} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    flow.init(backend="local")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    if ">>>" in inspect.getsource(module):
        assert result.attempted > 0

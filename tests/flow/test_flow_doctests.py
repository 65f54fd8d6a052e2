"""The examples in the flow library's docstrings run (on the local backend)."""

from __future__ import annotations

import doctest
import importlib

import pytest

from rlflow import flow

pytestmark = pytest.mark.timeout(60)

MODULES = [
    "rlflow.flow",
    "rlflow.flow.local",
    "rlflow.flow.merge",
    "rlflow.flow.metrics",
    "rlflow.flow.parallel",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    flow.init(backend="local")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0

"""Every ``>>>`` example in ``src/rlflow`` runs (on the local backend); flow's are in tests/flow.

The modules are found by walking the package, so a new module's examples run without being
listed anywhere; a module whose source shows ``>>>`` but yields no example fails too (an
example that doctest cannot see is one that silently never runs).
"""

from __future__ import annotations

import doctest
import importlib
import pathlib
import pkgutil

import pytest

import rlflow
from rlflow import flow

pytestmark = pytest.mark.timeout(120)

SRC = pathlib.Path(rlflow.__file__).resolve().parent


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(rlflow.__path__, "rlflow."):
        if info.name.startswith("rlflow.flow"):
            continue  # tests/flow/test_flow_doctests.py
        relative = info.name.removeprefix("rlflow.").replace(".", "/")
        path = SRC / (relative + ("/__init__.py" if info.ispkg else ".py"))
        if ">>>" in path.read_text():
            names.append(info.name)
    return names


MODULES = _modules_with_examples()


def test_the_walk_finds_the_modules_with_examples() -> None:
    assert "rlflow.checks" in MODULES
    assert "rlflow.returns" in MODULES
    assert len(MODULES) >= 20


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    flow.init(backend="local")
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=False
    )
    assert result.attempted > 0, f"{name} shows '>>>' but doctest finds no example in it"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"

"""The import rules of DESIGN.md: flow knows nothing of RL or torch; nobody uses the old API."""

from __future__ import annotations

import ast
import pathlib

import pytest

pytestmark = pytest.mark.timeout(30)

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "rlflow"


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_flow_imports_no_torch_and_no_rl_module() -> None:
    for path in (SRC / "flow").rglob("*.py"):
        for name in imported_modules(path):
            assert not name.startswith(("torch", "gymnasium", "numpy")), (path, name)
            if name.startswith("rlflow."):
                assert name.startswith(("rlflow.flow", "rlflow.errors")), (path, name)


def test_nothing_imports_the_deprecated_ray_apis() -> None:
    for path in SRC.rglob("*.py"):
        for name in imported_modules(path):
            assert not name.startswith(("ray.util.iter", "ray.rllib")), (path, name)

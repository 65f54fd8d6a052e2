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
                assert name.startswith(("rlflow.flow", "rlflow.errors", "rlflow.checks")), (
                    path,
                    name,
                )


def test_nothing_imports_the_deprecated_ray_apis() -> None:
    for path in SRC.rglob("*.py"):
        for name in imported_modules(path):
            assert not name.startswith(("ray.util.iter", "ray.rllib")), (path, name)


# The layer order of DESIGN.md / ARCHITECTURE.md, lowest first: a module imports only from its own
# top-level package and from packages of a strictly lower rank.
RANKS = {
    "errors": 0,
    "checks": 1,
    "schedules": 1.5,
    "flow": 2,
    "config_failures": 2.5,
    "config_resources": 2.6,
    "config_logging": 2.7,
    "config_env": 2.8,
    "config_model": 2.9,
    "config": 3,
    "config_replay": 3.1,
    "tuned": 4,
    "checkpoint": 3,
    "backend_lease": 3,
    "data": 4,
    "envs": 4,
    "models": 4,
    "filters": 4,
    "returns": 5,
    "vtrace": 5,
    "policy": 6,
    "replay": 7,
    "workers": 7,
    "ops": 8,
    "algorithms": 9,
    "trainer_state": 9.5,
    "export": 9.6,
    "loggers": 9.7,
    "trainer": 10,
    "tune": 10.5,
    "cli": 11,
    "testing": 11,
    "__init__": 11,
    "__main__": 12,
}

# Compatibility re-exports of names that moved up a layer: each is a lazy module __getattr__
# (PEP 562), so importing the lower package never imports the upper one.
LAZY_REEXPORTS: dict[str, set[str]] = {
    "ops/__init__.py": {"algorithms"},  # UpdateWorkerWeights, now below apex_plan
    "policy/__init__.py": {"algorithms"},  # PGPolicy, PPOPolicy
    "policy/pg.py": {"algorithms"},
    "policy/ppo.py": {"algorithms"},
    "policy/dqn.py": {"algorithms"},
    "policy/impala.py": {"algorithms"},
    "policy/maml.py": {"algorithms"},
}


def _rlflow_targets(path: pathlib.Path) -> set[str]:
    """Top-level rlflow packages a module imports (``from rlflow import flow`` counts as flow)."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "rlflow":
                names = [f"rlflow.{alias.name}" for alias in node.names]
        else:
            continue
        out.update(n.split(".")[1] for n in names if n.startswith("rlflow."))
    return out


def _package_of(path: pathlib.Path) -> str:
    return path.relative_to(SRC).with_suffix("").parts[0]


def test_every_package_has_a_rank() -> None:
    packages = {_package_of(p) for p in SRC.rglob("*.py")}
    assert packages <= set(RANKS), sorted(packages - set(RANKS))


def test_lazy_reexports_import_nothing_at_import_time() -> None:
    for relative in LAZY_REEXPORTS:
        tree = ast.parse((SRC / relative).read_text())
        for node in tree.body:  # module level: only TYPE_CHECKING blocks may name the upper layer
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("rlflow.algorithms"), (relative, node.module)


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for path in SRC.rglob("*.py"):
        own = _package_of(path)
        relative = str(path.relative_to(SRC))
        for target in _rlflow_targets(path) - {own}:
            allowed = target in LAZY_REEXPORTS.get(relative, set())
            if target in RANKS and RANKS[target] >= RANKS[own] and not allowed:
                wrong.append(f"{relative} ({own}, rank {RANKS[own]}) imports rlflow.{target}")
    assert not wrong, "\n".join(sorted(wrong))


# An algorithm derived from another extends its config class (as RLlib's do) and nothing else;
# ppo_dqn composes PPO and DQN, so it also takes their policy classes.
ALLOWED_ALGORITHM_IMPORTS = {
    "a2c": {"rlflow.algorithms.pg.config"},
    "a3c": {"rlflow.algorithms.pg.config"},
    "apex": {"rlflow.algorithms.dqn.config"},
    "appo": {"rlflow.algorithms.impala.config"},
    "ppo_dqn": {
        "rlflow.algorithms.ppo.config",
        "rlflow.algorithms.ppo.policy",
        "rlflow.algorithms.dqn.config",
        "rlflow.algorithms.dqn.policy",
    },
}


def test_no_algorithm_imports_another_algorithm() -> None:
    wrong = []
    for package in (SRC / "algorithms").iterdir():
        if not package.is_dir() or package.name.startswith("_"):
            continue
        allowed = ALLOWED_ALGORITHM_IMPORTS.get(package.name, set())
        for path in package.rglob("*.py"):
            for name in imported_modules(path):
                parts = name.split(".")
                foreign = len(parts) > 2 and parts[:2] == ["rlflow", "algorithms"]
                if foreign and parts[2] != package.name and name not in allowed:
                    wrong.append(f"{path.relative_to(SRC)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_plan_module_imports_ray() -> None:
    plans = list((SRC / "algorithms").glob("*/plan.py"))
    assert len(plans) >= 10
    for path in plans:
        for name in imported_modules(path):
            assert name != "ray" and not name.startswith("ray."), (path, name)

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
# top-level package and from packages of a strictly lower rank. Every rank is a whole number.
RANKS = {
    "errors": 0,
    "version": 0,
    "checks": 1,
    "lazy": 1,
    "schedules": 2,
    "flow": 2,
    "storage": 2,
    "config": 3,
    "checkpoint": 3,
    "backend_lease": 3,
    "data": 4,
    "envs": 4,
    "models": 4,
    "filters": 4,
    "loggers": 4,
    "returns": 5,
    "vtrace": 5,
    "export": 5,
    "offline": 5,
    "learner": 5,
    "policy": 6,
    "serve": 6,
    "replay": 7,
    "workers": 7,
    "ops": 8,
    "algorithms": 9,
    "trainer_state": 10,
    "setup": 10,
    "trainer": 11,
    "tune": 12,
    "cli": 12,
    "testing": 12,
    "__init__": 12,
    "__main__": 13,
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


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for path in SRC.rglob("*.py"):
        own = _package_of(path)
        relative = str(path.relative_to(SRC))
        for target in _rlflow_targets(path) - {own}:
            if target in RANKS and RANKS[target] >= RANKS[own]:
                wrong.append(f"{relative} ({own}, rank {RANKS[own]}) imports rlflow.{target}")
    assert not wrong, "\n".join(sorted(wrong))


# Families (packages inside algorithms/ that several algorithms share) never import an algorithm;
# a family may build on another (twin_q on q_learning).
# An algorithm imports families and, where it is a variant of another, the other: a2c/a3c extend
# pg's config, apex dqn's; appo runs impala's dataflow, sac and td3 dqn's (as RLlib's did);
# ppo_dqn composes PPO and DQN, so it takes their configs and policies; r2d2 is DQN with a
# recurrent Q network (its config, policy and plan extended); apex_r2d2 is R2D2 on Ape-X's
# dataflow (both configs, Ape-X's plan); mappo is PPO for a team (PPO's config and policy
# extended, its plan run); apex_td3 is TD3 on Ape-X's dataflow (TD3's config and
# policy extended, Ape-X's dataflow config and plan); apex_ddpg is apex_td3 with DDPG's defaults;
# qmix is DQN's replay for a team (config, policy and plan extended); vdn is qmix's sum mixer;
# maddpg runs dqn's dataflow; matd3 is maddpg with TD3's fixes (config, policy, plan extended).
FAMILIES = {"q_learning", "twin_q", "actor_learner", "perturbation"}
ALLOWED_ALGORITHM_IMPORTS = {
    "a2c": {"rlflow.algorithms.pg.config"},
    "a3c": {"rlflow.algorithms.pg.config"},
    "apex": {"rlflow.algorithms.dqn.config"},
    "bc": {"rlflow.algorithms.marwil.config"},
    "ddppo": {"rlflow.algorithms.ppo.config"},
    "mappo": {
        "rlflow.algorithms.ppo.config",
        "rlflow.algorithms.ppo.policy",
        "rlflow.algorithms.ppo.plan",
    },
    "cql": {
        "rlflow.algorithms.sac.config",
        "rlflow.algorithms.sac.policy",
        "rlflow.algorithms.dqn.plan",
    },
    "appo": {"rlflow.algorithms.impala.config", "rlflow.algorithms.impala.plan"},
    "sac": {"rlflow.algorithms.dqn.plan"},
    "td3": {"rlflow.algorithms.dqn.plan"},
    "r2d2": {
        "rlflow.algorithms.dqn.config",
        "rlflow.algorithms.dqn.policy",
        "rlflow.algorithms.dqn.plan",
    },
    "apex_r2d2": {
        "rlflow.algorithms.r2d2.config",
        "rlflow.algorithms.apex.config",
        "rlflow.algorithms.apex.plan",
    },
    "apex_td3": {
        "rlflow.algorithms.td3.config",
        "rlflow.algorithms.td3.policy",
        "rlflow.algorithms.apex.config",
        "rlflow.algorithms.apex.plan",
    },
    "apex_ddpg": {"rlflow.algorithms.apex_td3.config", "rlflow.algorithms.apex_td3.plan"},
    "qmix": {
        "rlflow.algorithms.dqn.config",
        "rlflow.algorithms.dqn.policy",
        "rlflow.algorithms.dqn.plan",
    },
    "vdn": {"rlflow.algorithms.qmix.config", "rlflow.algorithms.qmix.plan"},
    "maddpg": {"rlflow.algorithms.dqn.plan"},
    "matd3": {
        "rlflow.algorithms.maddpg.config",
        "rlflow.algorithms.maddpg.policy",
        "rlflow.algorithms.maddpg.plan",
    },
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
                if not foreign or parts[2] == package.name or name in allowed:
                    continue
                if parts[2] in FAMILIES:
                    continue  # what a family shares (families build on families too)
                wrong.append(f"{path.relative_to(SRC)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_families_import_no_algorithm() -> None:
    packages = {p.name for p in (SRC / "algorithms").iterdir() if p.is_dir()}
    assert packages >= FAMILIES
    wrong = []
    for family in FAMILIES:
        for path in (SRC / "algorithms" / family).rglob("*.py"):
            for name in imported_modules(path):
                parts = name.split(".")
                algorithm = len(parts) > 2 and parts[:2] == ["rlflow", "algorithms"]
                if algorithm and parts[2] not in FAMILIES:
                    wrong.append(f"{path.relative_to(SRC)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_plan_module_imports_ray() -> None:
    plans = list((SRC / "algorithms").glob("*/plan.py"))
    assert len(plans) >= 10
    for path in plans:
        for name in imported_modules(path):
            assert name != "ray" and not name.startswith("ray."), (path, name)

"""Lines of each algorithm's plan against the RLlib Flow paper (the programmability measure).

The paper (Liang, Wu et al., "RLlib Flow: Distributed Reinforcement Learning is a Dataflow
Problem", NeurIPS 2021) counts, per algorithm, the lines of its execution plan plus the
operators written for that algorithm; library operators shared by many algorithms are not
counted, and neither are configs or losses. This script counts ours the same way, from the
source files alone (nothing is imported, so it runs while the package is being edited):

- **code lines**: lines holding code; blank lines, comments, docstrings, imports and
  ``__all__`` are left out.
- **plan fn**: the plan function alone.
- **plan+own**: the algorithm's ``plan.py`` (its plan function, constants and every operator
  defined there), the definitions in the package's other modules that ``plan.py`` reaches (an
  operator moved beside the plan), and every shared operator (below) that this algorithm
  alone uses. ``config.py``, ``policy.py`` (the loss), ``__init__.py`` and tools such as
  ``maml/evaluate.py`` are not part of the plan.
- **plan+lineage** (compared with the paper): plan+own, plus the shared operators this
  algorithm shares only with algorithms it derives from or that derive from it (a package
  importing another's, as APPO runs IMPALA's dataflow and ppo_dqn composes PPO and DQN).
  IMPALA's train op is in IMPALA's plan file and APPO reuses it; it is APPO's code too, which
  single-use counting would miss.
- **package**: every module of ``rlflow/algorithms/<name>/`` (config, policy, plan, ...), plus
  the lineage operators: what a reader must take in to know the whole algorithm.

Shared operators are the top-level definitions of ``rlflow.ops``, of the algorithm families
(``rlflow/algorithms/<family>/``, the packages without a plan; their ``config.py``, ``policy.py``
and ``__init__.py`` left out, as an algorithm's are) and of the other algorithms' plan modules
(IMPALA's train op, DQN's replay dataflow). Users of an operator are found by scanning the
names each algorithm package references (any module of it), with references between shared
definitions followed transitively (a private helper belongs to the users of the operators that
call it). Code outside ``ops/`` and ``algorithms/`` (the trainer, ``examples/``) counts as one
more user, so an operator that it also uses is general, counted for no algorithm. Nothing is
hard-coded: move an operator between ``ops/``, a family and a package and the counts follow.
Below the table, each algorithm's counted operators are listed with their users, so every count
can be checked.

Run: ``python benchmarks/plan_lines.py``.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "rlflow"
OTHER = "<other>"
"""The user name of code outside ``ops/`` and ``algorithms/`` (trainer, examples, ...)."""

PAPER_LINES: dict[str, int] = {
    "a3c": 11,
    "a2c": 25,
    "dqn": 87,
    "ppo": 79,
    "apex": 126,
    "impala": 89,
    "maml": 136,
    # Not in the paper's table: RLlib 1.x's rllib/examples/two_trainer_workflow.py, the PPO + DQN
    # multi-agent plan this algorithm rebuilds. Measured from ray-project/ray at commit
    # 01433cf7b62c122b8caab4392d20a687e8d6a8f7, a Ray 1.x revision (LocalReplayBuffer from
    # ray.rllib.execution.replay_buffer, build_trainer, --torch / --mixed-torch-tf flags; the
    # release tag could not be resolved from the stored copy). The plan function is the same
    # as when it was added in ray-project/ray#8334 (merged 2020-05-06).
    # Its execution plan, `custom_training_workflow`, with the buffer and the two metric
    # operators defined inside it, spans 55 physical lines; 44 of them hold code (blank and
    # comment lines left out; it has no docstring or imports), counted as `code_lines` does.
    "ppo_dqn": 44,
}
"""The paper's lines of code of each algorithm's execution plan (its table), by our name."""


# ---------------------------------------------------------------------------- line counting
def _is_all(node: ast.AST) -> bool:
    """True for an ``__all__ = [...]`` statement."""
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    return (
        isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == "__all__"
    )


def _skipped_lines(tree: ast.Module) -> set[int]:
    """Lines of docstrings, imports and ``__all__`` in a parsed module."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        span = range(getattr(node, "lineno", 0), (getattr(node, "end_lineno", 0) or 0) + 1)
        if isinstance(node, ast.Import | ast.ImportFrom) or _is_all(node):
            skip.update(span)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))  # attr docs
    return skip


def code_lines(source: str) -> set[int]:
    """Numbers of the lines of ``source`` that hold code (see the module docstring)."""
    lines: set[int] = set()
    ignored = {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    }
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in ignored:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines - _skipped_lines(ast.parse(source))


# ----------------------------------------------------------------------- definitions and uses
@dataclass
class Definition:
    """A top-level function or class of a module, with the names it references."""

    module: str
    name: str
    lines: int
    refs: set[str] = field(default_factory=set)
    users: set[str] = field(default_factory=set)
    home: str | None = None
    """The algorithm whose plan module defines it (counted in that algorithm's plan)."""
    path: str = ""
    """Its module's path below ``rlflow/``, for the listing."""


def referenced_names(node: ast.AST) -> set[str]:
    """Every name, attribute and imported name that ``node`` mentions."""
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in sub.names)
            names.update(alias.name for alias in sub.names)
    return names


def definitions(path: Path) -> list[Definition]:
    """The top-level functions and classes of ``path``, with their code lines and references."""
    source = path.read_text()
    tree = ast.parse(source)
    counted = code_lines(source)
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            span = set(range(start, (node.end_lineno or node.lineno) + 1))
            refs = referenced_names(node) - {node.name}
            relative = str(path.relative_to(SRC))
            out.append(Definition(path.stem, node.name, len(counted & span), refs, path=relative))
    return out


def names_used(paths: Iterable[Path]) -> set[str]:
    """Every name the modules at ``paths`` reference."""
    used: set[str] = set()
    for path in paths:
        used |= referenced_names(ast.parse(path.read_text()))
    return used


def algorithm_packages() -> dict[str, Path]:
    """Algorithm name -> package dir, for every package of ``rlflow/algorithms`` with a plan."""
    return {p.parent.name: p.parent for p in sorted((SRC / "algorithms").glob("*/plan.py"))}


def shared_modules(packages: dict[str, Path]) -> dict[Path, str | None]:
    """Modules whose definitions are shared operators -> the algorithm whose package holds them
    (None for ``rlflow.ops`` and the families)."""
    out: dict[Path, str | None] = {path: None for path in sorted((SRC / "ops").glob("*.py"))}
    for package in sorted(p for p in (SRC / "algorithms").iterdir() if p.is_dir()):
        if package.name in packages:
            out[package / "plan.py"] = package.name
        elif not package.name.startswith("_"):  # a family: what several algorithms share
            for path in sorted(package.glob("*.py")):
                if path.stem not in ("config", "policy", "__init__"):
                    out[path] = None
    return out


def attribute_ops(packages: dict[str, Path]) -> list[Definition]:
    """Every shared definition (see the module docstring), with the set of algorithms that use
    it; ``home`` records the algorithm whose plan module defines it."""
    ops = []
    for path, home in shared_modules(packages).items():
        for d in definitions(path):
            d.home = home
            ops.append(d)
    users_of = {name: names_used(p.rglob("*.py")) for name, p in packages.items()}
    other_files = [
        p
        for p in [*SRC.rglob("*.py"), *(ROOT / "examples").glob("*.py")]
        if p.name != "__init__.py"  # re-exports, not uses
        and not p.is_relative_to(SRC / "ops")
        and not p.is_relative_to(SRC / "algorithms")
    ]
    users_of[OTHER] = names_used(other_files)
    for op in ops:
        op.users = {user for user, names in users_of.items() if op.name in names}
    changed = True
    while changed:  # a helper belongs to the users of every operator that references it
        changed = False
        for op in ops:
            for caller in ops:
                if caller is not op and op.name in caller.refs and not caller.users <= op.users:
                    op.users |= caller.users
                    changed = True
    return ops


# ------------------------------------------------------------------------------------ report
def lineages(packages: dict[str, Path]) -> dict[str, set[str]]:
    """Algorithm -> itself and the algorithms it derives from or that derive from it.

    B derives from A when B's package imports from A's (as APPO extends IMPALA's config, and
    ppo_dqn composes PPO and DQN); only direct links count.
    """
    out = {name: {name} for name in packages}
    for name, package in packages.items():
        for path in package.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                modules = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                for module in modules:
                    parts = module.split(".")
                    other = parts[2] if parts[:2] == ["rlflow", "algorithms"] else None
                    if len(parts) > 2 and other in packages and other != name:
                        out[name].add(other)
                        out[other].add(name)
    return out


@dataclass
class Row:
    """One algorithm's counts (code lines) and the operators behind them."""

    name: str
    plan_fn: int
    plan: int
    own_ops: list[Definition]
    lineage_ops: list[Definition]
    package: int

    def ops_lines(self, ops: list[Definition]) -> int:
        """Code lines of ``ops``."""
        return sum(op.lines for op in ops)


def plan_lines(name: str, package: Path) -> tuple[int, int]:
    """(the plan function's lines, plan.py's + the package definitions plan.py reaches)."""
    plan_path = package / "plan.py"
    plan_defs = definitions(plan_path)
    plan_fn = next((d for d in plan_defs if d.name == f"{name}_plan"), None) or next(
        d for d in plan_defs if d.name.endswith("_plan")
    )
    # An operator moved out of plan.py into another module of the package (not config,
    # policy or __init__) still counts when plan.py reaches it.
    local = [
        d
        for p in sorted(package.glob("*.py"))
        if p.stem not in ("plan", "config", "policy", "__init__")
        for d in definitions(p)
    ]
    reach: set[str] = set()
    frontier = referenced_names(ast.parse(plan_path.read_text()))
    while frontier:
        found = {d.name for d in local if d.name in frontier} - reach
        reach |= found
        frontier = set().union(*(d.refs for d in local if d.name in found))
    beside = sum(d.lines for d in local if d.name in reach)
    return plan_fn.lines, len(code_lines(plan_path.read_text())) + beside


def package_row(name: str, package: Path, ops: list[Definition], lineage: set[str]) -> Row:
    """Count one algorithm (see the module docstring for the rule)."""
    plan_fn, plan = plan_lines(name, package)
    shared = [op for op in ops if op.home != name]  # its plan module is counted in `plan`
    own = [op for op in shared if op.users == {name}]
    family = [op for op in shared if name in op.users and op.users <= lineage]
    whole = sum(len(code_lines(p.read_text())) for p in package.rglob("*.py"))
    return Row(name, plan_fn, plan, own, family, whole + sum(op.lines for op in family))


def print_table(rows: list[Row]) -> None:
    """The table: one row per algorithm."""
    print(
        f"{'algorithm':<10} {'plan fn':>7} {'plan+own':>8} {'plan+lineage':>12} "
        f"{'package':>7} {'paper':>5} {'ratio':>5}"
    )
    for row in rows:
        compared = row.plan + row.ops_lines(row.lineage_ops)
        paper = PAPER_LINES.get(row.name)
        ratio = f"{compared / paper:5.2f}" if paper else f"{'-':>5}"
        print(
            f"{row.name:<10} {row.plan_fn:>7} {row.plan + row.ops_lines(row.own_ops):>8} "
            f"{compared:>12} {row.package:>7} {paper or '-':>5} {ratio}"
        )
    print(
        "\nCode lines. plan fn: the plan function alone. plan+own: plan.py (and what it reaches "
        "in its package)\n+ the shared operators (rlflow.ops, families, other plans) only this "
        "algorithm uses. plan+lineage:\nalso the operators it shares only with algorithms it "
        "derives from or that derive from it\n(IMPALA's train op, which APPO reuses): the "
        "paper's measure, and what ratio = plan+lineage / paper\ncompares. package: the whole "
        "package (config, policy, plan, ...) + the lineage operators.\n"
    )


def main() -> None:
    """Print the table, then the operators behind the counts."""
    packages = algorithm_packages()
    ops = attribute_ops(packages)
    family = lineages(packages)
    rows = [package_row(name, path, ops, family[name]) for name, path in packages.items()]
    print_table(rows)
    for row in rows:
        for op in row.lineage_ops:
            kind = (
                "own"
                if op in row.own_ops
                else "shared with " + ", ".join(sorted(op.users - {row.name}))
            )
            print(f"{row.name}: {op.path}:{op.name} ({op.lines}, {kind})")


if __name__ == "__main__":
    main()

"""Count the lines of each algorithm's plan function (the paper's programmability measure).

Physical lines span the ``def`` to the last line; code lines leave out blank lines, comment-only
lines and the docstring. ``+ops`` adds the code lines of the operators defined in the plan's
module (classes and functions below the plan, used by that algorithm only), docstrings left out.
``paper`` is the line count the RLlib Flow paper reports for the algorithm, where we compare
with one (MAML: 136; the two-trainer PPO + DQN plan: 12). Run: ``python benchmarks/plan_lines.py``.
"""

from __future__ import annotations

import ast
import inspect
import io
import tokenize

from rlflow.algorithms import ALGORITHMS

PAPER_LINES = {"maml": 136, "ppo_dqn": 12}
"""Lines of the algorithm reported by the RLlib Flow paper (Liang et al. 2021), by name."""


def count_lines(source: str) -> tuple[int, int]:
    """(physical, code) lines of the function(s) or class(es) defined in ``source``."""
    tree = ast.parse(source)
    assert isinstance(tree.body[0], ast.FunctionDef | ast.ClassDef)
    physical = source.rstrip("\n").count("\n") + 1
    skip: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.ClassDef):
            continue
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            skip.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (
            tokenize.COMMENT,
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            continue
        code_lines.update(range(tok.start[0], tok.end[0] + 1))
    return physical, len(code_lines - skip)


def operator_lines(plan: object) -> int:
    """Code lines of the classes and functions defined after the plan in its module."""
    module = inspect.getmodule(plan)
    assert module is not None
    tree = ast.parse(inspect.getsource(module))
    plan_name = getattr(plan, "__name__", "")
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    later = names[names.index(plan_name) + 1 :] if plan_name in names else []
    total = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in later:
            total += count_lines(inspect.getsource(getattr(module, node.name)))[1]
    return total


def main() -> None:
    """Print one row per algorithm."""
    print(f"{'algorithm':<10} {'plan':<14} {'physical':>8} {'code':>5} {'+ops':>5} {'paper':>5}")
    for name, spec in ALGORITHMS.items():
        source = inspect.getsource(spec.plan)
        physical, code = count_lines(source)
        ops = code + operator_lines(spec.plan)
        paper = PAPER_LINES.get(name, "-")
        print(f"{name:<10} {spec.plan.__name__:<14} {physical:>8} {code:>5} {ops:>5} {paper:>5}")


if __name__ == "__main__":
    main()

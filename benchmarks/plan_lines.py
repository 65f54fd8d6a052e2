"""Count the lines of each algorithm's plan function (the paper's programmability measure).

Physical lines span the ``def`` to the last line; code lines leave out blank lines, comment-only
lines and the docstring. Run: ``python benchmarks/plan_lines.py``.
"""

from __future__ import annotations

import ast
import inspect
import io
import tokenize

from rlflow.algorithms import ALGORITHMS


def count_lines(source: str) -> tuple[int, int]:
    """(physical, code) lines of the single function defined in ``source``."""
    tree = ast.parse(source)
    func = tree.body[0]
    assert isinstance(func, ast.FunctionDef)
    physical = source.rstrip("\n").count("\n") + 1
    skip: set[int] = set()
    first = func.body[0]
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


def main() -> None:
    """Print one row per algorithm."""
    print(f"{'algorithm':<10} {'plan':<10} {'physical':>8} {'code':>5}")
    for name, spec in ALGORITHMS.items():
        source = inspect.getsource(spec.plan)
        physical, code = count_lines(source)
        print(f"{name:<10} {spec.plan.__name__:<10} {physical:>8} {code:>5}")


if __name__ == "__main__":
    main()

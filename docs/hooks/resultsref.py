"""The results page and each algorithm page's results, read from what ``benchmarks/curves.py``
wrote (``benchmarks/results/curves/summary.json`` and its pictures).

Nothing here is measured at build time: a figure shown is one the script measured, with the
machine, versions, date and budget it was measured at.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

__all__ = ["CURVES", "algorithm_results", "curves_summary", "pictures", "results_page"]

CURVES = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "curves"
"""Where ``benchmarks/curves.py`` writes."""


def curves_summary() -> dict[str, Any]:
    """``summary.json`` of the curves (empty when the script has not run)."""
    path = CURVES / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {"cases": {}}


def pictures() -> dict[str, bytes]:
    """The pictures the summary names, by their site path (``results/<file>.png``)."""
    cases = curves_summary()["cases"].values()
    return {f"results/{c['picture']}": (CURVES / c["picture"]).read_bytes() for c in cases}


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _row(key: str, case: dict[str, Any], link: str) -> str:
    """One case as a table row: budget, seeds at the target, median steps to it, final returns
    (median, min, max over seeds), wall time per seed."""
    seeds = case["seeds"]
    finals = [s["final_return"] for s in seeds if s["final_return"] is not None]
    reached = [s["steps_to_target"] for s in seeds if s["steps_to_target"] is not None]
    target = case["target"]
    at_target = "-" if target is None else f"{len(reached)} of {len(seeds)} (>= {target:g})"
    to_target = f"{statistics.median(reached):,.0f}" if reached else "-"
    final = (
        f"{_number(statistics.median(finals))} ({_number(min(finals))} to {_number(max(finals))})"
        if finals
        else "-"
    )
    seconds = statistics.median(s["seconds"] for s in seeds)
    return (
        f"| [{key}]({link}) | {case['backend']} | {case['budget']:,} | {at_target} "
        f"| {to_target} | {final} | {seconds:,.0f} s | {case['date'][:10]} |"
    )


_HEAD = [
    "| Case | Backend | Budget (env steps) | Seeds at the target | Median steps to it "
    "| Final return: median (min to max) | Wall time per seed | Measured |",
    "|---|---|---|---|---|---|---|---|",
]


def _machine(machine: dict[str, Any]) -> str:
    gpu = machine.get("gpu") or "no GPU"
    return (
        f"{machine['cpu']}, {machine['cores']} cores, {gpu}; Python {machine['python']}, "
        f"rlflow {machine['rlflow']}, torch {machine['torch']}, Ray {machine['ray']}, "
        f"Gymnasium {machine['gymnasium']}"
    )


def algorithm_results(algo: str) -> list[str]:
    """The results section of ``algo``'s page: its cases' rows and pictures (none: empty)."""
    summary = curves_summary()
    cases = {k: c for k, c in summary["cases"].items() if c["algo"] == algo and not c["quick"]}
    if not cases:
        return []
    where = _machine(summary["machine"])
    lines = ["## Results", "", f"Measured by `benchmarks/curves.py` on {where}:", ""]
    lines += [*_HEAD, *(_row(k, c, "../results.md") for k, c in cases.items()), ""]
    for case in cases.values():
        lines += [f"![{algo} on {case['env']}](../results/{case['picture']})", ""]
    return lines


def results_page() -> str:
    """The results page: every measured case, its picture, the machine."""
    summary = curves_summary()
    cases = {k: c for k, c in summary["cases"].items() if not c["quick"]}
    lines = [
        "# Results",
        "",
        "Learning curves of the algorithms with their shipped tuned configs, trained the way a "
        "user trains them (`rlflow train ALGO --env ENV --seed S --stop-timesteps BUDGET`), "
        "one seed after the other, by `benchmarks/curves.py`; each picture is `rlflow plot` of "
        "the seeds: their mean return with a band from the lowest to the highest. The return "
        "is `episode_return_mean`, the mean of the last training episodes (100 unless the "
        "tuned config says otherwise); the target is the return the algorithm's learning test "
        "holds in CI. `python benchmarks/curves.py --list` lists every case with its budget; "
        "a case not below has not been measured yet.",
        "",
    ]
    if not cases:
        return "\n".join([*lines, "No case has been measured yet.", ""])
    lines += [f"Machine: {_machine(summary['machine'])}.", "", *_HEAD]
    lines += [_row(k, c, f"#{c['picture'].removesuffix('.png').lower()}") for k, c in cases.items()]
    lines.append("")
    for key, case in cases.items():
        anchor = case["picture"].removesuffix(".png").lower()
        lines += [f"## {key} {{#{anchor}}}", "", f"![{key}](results/{case['picture']})", ""]
        if case["note"]:
            lines += [f"Budget and target: {case['note']}.", ""]
    return "\n".join(lines)

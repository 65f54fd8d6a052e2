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

ZOO = (
    "https://github.com/DLR-RM/rl-baselines3-zoo/blob/0088472b8cb622732bdbc4aa3d0d0abde86c67ed/"
    "benchmark.md"
)
"""rl-baselines3-zoo's table of its trained agents (SB3 with the zoo's tuned settings)."""
PUBLISHED: dict[tuple[str, str], tuple[float, float, str]] = {
    ("a2c", "CartPole-v1"): (500.0, 0.0, "500k"),
    ("ppo", "CartPole-v1"): (500.0, 0.0, "100k"),
    ("dqn", "CartPole-v1"): (500.0, 0.0, "50k"),
    ("ppo", "Pendulum-v1"): (-172.225, 104.159, "100k"),
    ("sac", "Pendulum-v1"): (-156.995, 88.714, "20k"),
    ("td3", "Pendulum-v1"): (-151.855, 90.227, "20k"),
}
"""``(algo, env) -> (mean, std, training steps)`` from `ZOO`: one training run per row, then
its deterministic policy evaluated for 150k steps. Not the same measure as the curves' final
return (the mean of the last training episodes, exploring), which it bounds from above."""


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
    zoo = PUBLISHED.get((case["algo"], case["env"]))
    published = "-" if zoo is None else f"{zoo[0]:,.1f} ± {zoo[1]:,.1f} at {zoo[2]}"
    return (
        f"| [{key}]({link}) | {case['backend']} | {case['budget']:,} | {at_target} "
        f"| {to_target} | {final} | {published} | {seconds:,.0f} s | {case['date'][:10]} |"
    )


_HEAD = [
    "| Case | Backend | Budget (env steps) | Seeds at the target | Median steps to it "
    "| Final return: median (min to max) | rl-baselines3-zoo | Wall time per seed | Measured |",
    "|---|---|---|---|---|---|---|---|---|",
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
        "a case not below has not been measured yet. Beside them, where it has the case, "
        f"[rl-baselines3-zoo's published result]({ZOO}) (Stable-Baselines3 with the zoo's "
        "tuned settings: one training run of the steps named, then its deterministic policy "
        "evaluated; an upper bound for a training return, which still explores).",
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

"""The results page and each algorithm page's results, read from what ``benchmarks/curves.py``
wrote (``benchmarks/results/curves/summary.json`` and its pictures).

Nothing here is measured at build time: a figure shown is one the script measured, with the
machine, versions, date and budget it was measured at.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CURVES",
    "PUBLISHED",
    "Published",
    "algorithm_results",
    "curves_summary",
    "pictures",
    "results_page",
]

CURVES = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "curves"
"""Where ``benchmarks/curves.py`` writes."""

ZOO = (
    "https://github.com/DLR-RM/rl-baselines3-zoo/blob/0088472b8cb622732bdbc4aa3d0d0abde86c67ed/"
    "benchmark.md"
)
"""rl-baselines3-zoo's table of its trained agents (SB3 with the zoo's tuned settings): one
training run per row, then its deterministic policy (Atari: stochastic) evaluated for 150k
steps (Atari: ~600k)."""
RLLIB = (
    "https://github.com/ray-project/rl-experiments/blob/07e4acfb53699312f8de03f5dd12cad0ea965b6f/"
    "README.md"
)
"""RLlib's Atari results (ray-project/rl-experiments): returns after 10M env steps (40M
frames) of its tuned Atari configs."""


@dataclass(frozen=True)
class Published:
    """A published result of another implementation on one of rlflow's tuned envs."""

    source: str
    """Whose (a link name in `SOURCES`)."""
    mean: float
    std: float | None
    steps: str
    """Training env steps (``1M``)."""
    env: str
    """The env as published (older versions of rlflow's: ``Hopper-v3`` for ``Hopper-v5``)."""

    def cell(self) -> str:
        """The result as a table cell: mean (± std) at steps, source and env."""
        spread = "" if self.std is None else f" ± {self.std:,.1f}"
        where = f"[{self.source}]({SOURCES[self.source]})"
        return f"{self.mean:,.1f}{spread} at {self.steps} ({where}, {self.env})"


SOURCES = {"zoo": ZOO, "RLlib": RLLIB}


def _zoo(mean: float, std: float, steps: str, env: str) -> Published:
    return Published("zoo", mean, std, steps, env)


PUBLISHED: dict[tuple[str, str], tuple[Published, ...]] = {
    ("a2c", "CartPole-v1"): (_zoo(500.0, 0.0, "500k", "CartPole-v1"),),
    ("ppo", "CartPole-v1"): (_zoo(500.0, 0.0, "100k", "CartPole-v1"),),
    ("dqn", "CartPole-v1"): (_zoo(500.0, 0.0, "50k", "CartPole-v1"),),
    ("ppo", "Pendulum-v1"): (_zoo(-172.225, 104.159, "100k", "Pendulum-v1"),),
    ("sac", "Pendulum-v1"): (_zoo(-156.995, 88.714, "20k", "Pendulum-v1"),),
    ("td3", "Pendulum-v1"): (_zoo(-151.855, 90.227, "20k", "Pendulum-v1"),),
    ("ppo", "Hopper-v5"): (_zoo(2410.435, 10.026, "1M", "Hopper-v3"),),
    ("ppo", "HalfCheetah-v5"): (_zoo(5819.099, 663.530, "1M", "HalfCheetah-v3"),),
    ("ppo", "Ant-v5"): (_zoo(1327.158, 451.577, "1M", "Ant-v3"),),
    ("sac", "Hopper-v5"): (_zoo(2325.547, 1129.676, "1M", "Hopper-v3"),),
    ("sac", "HalfCheetah-v5"): (_zoo(9535.451, 100.470, "1M", "HalfCheetah-v3"),),
    ("sac", "Ant-v5"): (_zoo(4615.791, 1354.111, "1M", "Ant-v3"),),
    ("td3", "Hopper-v5"): (_zoo(3606.390, 4.027, "1M", "Hopper-v3"),),
    ("td3", "HalfCheetah-v5"): (_zoo(9655.666, 969.916, "1M", "HalfCheetah-v3"),),
    ("td3", "Ant-v5"): (_zoo(5813.274, 589.773, "1M", "Ant-v3"),),
    ("ppo", "ALE/Pong-v5"): (_zoo(20.989, 0.105, "10M", "PongNoFrameskip-v4"),),
    ("dqn", "ALE/Pong-v5"): (_zoo(20.602, 0.613, "10M", "PongNoFrameskip-v4"),),
    ("ppo", "ALE/Breakout-v5"): (
        _zoo(398.033, 33.328, "10M", "BreakoutNoFrameskip-v4"),
        Published("RLlib", 122.0, None, "10M", "BreakoutNoFrameskip-v4"),
    ),
    ("dqn", "ALE/Breakout-v5"): (_zoo(358.327, 61.981, "10M", "BreakoutNoFrameskip-v4"),),
    ("ars", "Swimmer-v5"): (_zoo(355.267, 12.796, "2M", "Swimmer-v3"),),
    ("ars", "HalfCheetah-v5"): (_zoo(4815.192, 1340.752, "12M", "HalfCheetah-v3"),),
    ("impala", "ALE/Breakout-v5"): (
        Published("RLlib", 385.0, None, "10M", "BreakoutNoFrameskip-v4"),
    ),
}
"""``(algo, env) -> published results`` on rlflow's tuned envs. The zoo's figure is one run's
deterministic policy evaluated after training; RLlib's the training return at 10M steps. Neither
is the same measure as the curves' final return (the mean of the last training episodes,
exploring), and the envs' versions differ in details (v3 MuJoCo models, the NoFrameskip-v4 Atari
games without sticky actions)."""


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
    published = "<br>".join(p.cell() for p in PUBLISHED.get((case["algo"], case["env"]), ())) or "-"
    budget = f"{case['budget']:,}" + (" rows" if case.get("data") else "")
    return (
        f"| [{key}]({link}) | {case['backend']} | {budget} | {at_target} "
        f"| {to_target} | {final} | {published} | {seconds:,.0f} s | {case['date'][:10]} |"
    )


_HEAD = [
    "| Case | Backend | Budget (env steps) | Seeds at the target | Median steps to it "
    "| Final return: median (min to max) | Published | Wall time per seed | Measured |",
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
    """The results page: every measured case, its picture, the machine; then the published
    results on tuned envs no case has measured."""
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
        "tuned config says otherwise); the offline algorithms (bc, marwil, cql) sample nothing: "
        "their budget counts rows trained and their return is their greedy evaluation's. The "
        "target is the return the algorithm's learning test holds in CI. `python "
        "benchmarks/curves.py --list` lists every case with its budget; a case not below has "
        "not been measured yet. Beside them, where they have the case, published results: "
        f"[rl-baselines3-zoo's]({ZOO}) (Stable-Baselines3 with the zoo's tuned settings: one "
        "training run of the steps named, then its deterministic policy evaluated; an upper "
        "bound for a training return, which still explores) and "
        f"[RLlib's Atari results]({RLLIB}) (training returns at 10M env steps).",
        "",
    ]
    if cases:
        lines += [f"Machine: {_machine(summary['machine'])}.", "", *_HEAD]
        lines += [_row(k, c, f"#{_anchor(c)}") for k, c in cases.items()]
        lines.append("")
    else:
        lines += ["No case has been measured yet.", ""]
    lines += _unmeasured({(c["algo"], c["env"]) for c in cases.values()})
    for key, case in cases.items():
        lines += [f"## {key} {{#{_anchor(case)}}}", "", f"![{key}](results/{case['picture']})", ""]
        lines += _case_notes(case)
    return "\n".join(lines)


def _anchor(case: dict[str, Any]) -> str:
    return str(case["picture"]).removesuffix(".png").lower()


def _case_notes(case: dict[str, Any]) -> list[str]:
    """Where a case's budget, target, data and return come from; the load it ran under."""
    lines = []
    if case["note"]:
        lines += [f"Budget and target: {case['note']}.", ""]
    if case.get("data"):
        lines += [f"Recorded experience: the run `{case['data']}` (`--output`).", ""]
    if case.get("y", "episode_return_mean") != "episode_return_mean":
        lines += [f"Return drawn: `{case['y']}`.", ""]
    loads = [s["load"] for s in case["seeds"] if "load" in s]
    if loads:
        high = max(max(load) for load in loads)
        lines += [f"1-minute load average during the seeds' runs: up to {high:.1f}.", ""]
    return lines


def _unmeasured(measured: set[tuple[str, str]]) -> list[str]:
    """The published results on rlflow's tuned envs that no curve here measures (yet)."""
    rows = [
        f"| {algo} | {env} | {'<br>'.join(p.cell() for p in published)} |"
        for (algo, env), published in PUBLISHED.items()
        if (algo, env) not in measured
    ]
    if not rows:
        return []
    return [
        "## Published results on tuned envs not measured here",
        "",
        "rlflow ships tuned configs for these; their budgets (1M MuJoCo steps for SAC and TD3, "
        "10M Atari steps) take days on the 2-core CPU the curves above ran on (SAC on "
        "HalfCheetah: ~27 env steps/s, `benchmarks/sac_halfcheetah.py`; IMPALA on Pong: ~2,600 "
        "frames/s, `benchmarks/impala_throughput.py`). The published figures, for the runs a "
        "bigger machine makes:",
        "",
        "| Algorithm | Env | Published |",
        "|---|---|---|",
        *rows,
        "",
    ]

"""The measured dataflow of a run dir: its saved plan graph joined with per-stage statistics.

A run dir holds ``plan.json`` (the plan's graph, `rlflow.loggers.write_plan`) and
``progress.jsonl``, whose rows carry ``stages`` (``{stage key: {items, fn_time_s,
wait_time_s}}``, counted since the trainer started) and ``time_total_s``. The rows of the latest
trainer (the tail of rows whose stage keys are nodes of the saved graph: a resumed run rebuilds
its plan with new node ids) give, per stage, its throughput (items over the wall time of those
iterations) and its share of that time (time in the stage's function plus time waiting on
actors). The stage with the largest share is the bottleneck. Sources, unions and stages that
run on the shard actors have no statistics of their own.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from rlflow.errors import ConfigError
from rlflow.flow import PlanGraph
from rlflow.loggers import JSONL_FILE, read_plan

__all__ = ["RunDataflow", "StageView", "format_table", "load_dataflow"]


class StageView(NamedTuple):
    """One stage's measured numbers over the latest trainer's iterations."""

    items: int
    """Items the stage put out."""
    fn_time_s: float
    """Seconds in the stage's function."""
    wait_time_s: float
    """Seconds waiting on actors (gather stages)."""
    items_per_s: float
    """``items`` over the wall time of those iterations."""
    share: float
    """``(fn_time_s + wait_time_s)`` over that wall time, 0..1."""


@dataclass(frozen=True)
class RunDataflow:
    """A run's plan graph with each stage's numbers (`load_dataflow`).

    Attributes:
        graph: the saved plan graph.
        algorithm: the algorithm's name (from ``plan.json``).
        env: the env id from ``config.yaml`` ("" if unknown).
        stages: node key -> its numbers (nodes without driver-side statistics are absent).
        first_iteration, last_iteration: the iterations the numbers cover.
        elapsed_s: the wall time of those iterations.
        env_steps_per_s: env steps sampled per second over them (None if not known).
        learner_thread: the last row's ``info["learner_thread"]`` (queue depth, ...), or {}.
    """

    graph: PlanGraph
    algorithm: str
    env: str
    stages: dict[str, StageView]
    first_iteration: int
    last_iteration: int
    elapsed_s: float
    env_steps_per_s: float | None
    learner_thread: dict[str, float]

    @classmethod
    def unmeasured(cls, graph: PlanGraph, algorithm: str, env: str) -> RunDataflow:
        """A plan graph before any run: no stage has numbers (``rlflow plan ALGO --html``, the
        plan figures of the documentation)."""
        return cls(graph, algorithm, env, {}, 0, 0, 0.0, None, {})

    @property
    def measured(self) -> bool:
        """Whether any stage has numbers."""
        return bool(self.stages)

    @property
    def bottleneck(self) -> str | None:
        """The key of the stage with the largest share of time (None without statistics)."""
        busy = {k: s.share for k, s in self.stages.items() if s.share > 0}
        return max(busy, key=busy.__getitem__) if busy else None


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / JSONL_FILE
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: not there; per-stage statistics come from the jsonl logger "
            "(train with it: --logger jsonl,...)"
        ) from None
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash
        if isinstance(row, dict) and isinstance(row.get("stages"), dict):
            rows.append(row)
    return rows


def _items(row: dict[str, Any]) -> dict[str, float]:
    return {k: _num(v.get("items")) for k, v in row["stages"].items() if isinstance(v, dict)}


def _latest_segment(rows: list[dict[str, Any]], keys: set[str]) -> list[dict[str, Any]]:
    """The tail of ``rows`` of one trainer: their stage keys all are nodes of the saved graph,
    and no stage's count goes down from a row to the next (a restored trainer counts anew)."""
    segment: list[dict[str, Any]] = []
    for row in reversed(rows):
        if not set(row["stages"]) <= keys:
            break
        if segment:
            later = _items(segment[-1])
            if any(n > later.get(k, 0.0) for k, n in _items(row).items()):
                break
        segment.append(row)
    return segment[::-1]


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0


def _env_id(run_dir: Path) -> str:
    import yaml

    try:
        return str(yaml.safe_load((run_dir / "config.yaml").read_text())["config"]["env"])
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return ""


def _view(raw: Any, elapsed: float) -> StageView:
    raw = raw if isinstance(raw, dict) else {}
    fn_s, wait_s = _num(raw.get("fn_time_s")), _num(raw.get("wait_time_s"))
    items = int(_num(raw.get("items")))
    return StageView(items, fn_s, wait_s, items / elapsed, (fn_s + wait_s) / elapsed)


def _learner_thread(row: dict[str, Any]) -> dict[str, float]:
    info = row.get("info")
    thread = info.get("learner_thread") if isinstance(info, dict) else None
    return {str(k): _num(v) for k, v in thread.items()} if isinstance(thread, dict) else {}


def load_dataflow(run_dir: str | Path) -> RunDataflow:
    """Read ``plan.json``, ``progress.jsonl`` and ``config.yaml`` of ``run_dir``; ConfigError if
    the plan or the progress file is missing, or no row matches the saved plan."""
    path = Path(run_dir)
    graph, algorithm = read_plan(path)
    segment = _latest_segment(_rows(path), {n.key for n in graph.nodes})
    if not segment:
        raise ConfigError(
            f"{path / JSONL_FILE}: no row with per-stage statistics of the saved plan "
            "(has the run finished an iteration?)"
        )
    first, last = segment[0], segment[-1]
    start = _num(first.get("time_total_s")) - _num(first.get("time_this_iter_s"))
    elapsed = max(_num(last.get("time_total_s")) - start, 1e-9)
    stages = {key: _view(raw, elapsed) for key, raw in last["stages"].items()}
    steps = _num(last.get("num_env_steps_sampled")) - _num(first.get("num_env_steps_sampled"))
    steps += _num(first.get("num_env_steps_sampled_this_iter"))
    return RunDataflow(
        graph=graph,
        algorithm=algorithm,
        env=_env_id(path),
        stages=stages,
        first_iteration=int(_num(first.get("iteration"))),
        last_iteration=int(_num(last.get("iteration"))),
        elapsed_s=elapsed,
        env_steps_per_s=steps / elapsed if "num_env_steps_sampled_this_iter" in first else None,
        learner_thread=_learner_thread(last),
    )


def format_table(flow: RunDataflow) -> str:
    """A text table of the stages in plan order: items, items/s, function and wait seconds,
    share of time; the bottleneck marked with ``<- bottleneck``."""
    width = max((len(n.key) for n in flow.graph.nodes), default=5)
    lines = [
        f"{flow.algorithm} on {flow.env or '?'}: iterations {flow.first_iteration}.."
        f"{flow.last_iteration}, {flow.elapsed_s:.2f} s",
        f"{'stage':<{width}}  {'items':>8}  {'items/s':>9}  {'fn s':>8}  {'wait s':>8}  "
        f"{'share':>6}",
    ]
    for node in flow.graph.nodes:
        s = flow.stages.get(node.key)
        if s is None:
            lines.append(f"{node.key:<{width}}  ({node.kind}: no statistics of its own)")
            continue
        mark = "  <- bottleneck" if node.key == flow.bottleneck else ""
        lines.append(
            f"{node.key:<{width}}  {s.items:>8d}  {s.items_per_s:>9.2f}  {s.fn_time_s:>8.3f}  "
            f"{s.wait_time_s:>8.3f}  {s.share:>6.1%}{mark}"
        )
    lines.extend(f"learner thread {k}: {v:g}" for k, v in flow.learner_thread.items())
    return "\n".join(lines)

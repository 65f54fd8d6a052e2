"""``plan.json``: the operator graph of a run's plan, saved in its run dir.

`rlflow.Trainer` writes it when it is made with a ``logdir`` (`LoggerSet.write_plan`); ``rlflow
plan RUN_DIR`` reads it back and joins it with the per-stage statistics of ``progress.jsonl``.
The graph is saved rather than rebuilt from ``config.yaml`` because a stage's key in a result's
``stages`` holds the node's id (``for_each(TrainOneStep)#8``), a number that depends on what the
process built before; and a custom ``plan=`` cannot be rebuilt from a config file at all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rlflow.errors import ConfigError
from rlflow.flow import PlanGraph

__all__ = ["PLAN_FILE", "read_plan", "write_plan"]

PLAN_FILE = "plan.json"
"""The saved plan graph of a run (`PlanGraph.to_dict` as JSON)."""


def write_plan(logdir: str | Path, graph: PlanGraph, *, algorithm: str = "") -> Path:
    """Write ``graph`` (and the ``algorithm`` name) to ``logdir/plan.json``, atomically (a
    resumed run, whose node ids differ, replaces it); returns the path."""
    path = Path(logdir) / PLAN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"algorithm": algorithm, **graph.to_dict()}
    tmp = path.with_name(f".{PLAN_FILE}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def read_plan(run_dir: str | Path) -> tuple[PlanGraph, str]:
    """The plan graph and algorithm name saved in ``run_dir``; ConfigError if the file is
    missing or damaged."""
    path = Path(run_dir) / PLAN_FILE
    try:
        data = json.loads(path.read_text())
        return PlanGraph.from_dict(data), str(data.get("algorithm", ""))
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no saved plan; runs write it since rlflow records plan graphs "
            "(train the run again, or use `rlflow plan ALGO` for the graph alone)"
        ) from None
    except (ValueError, AttributeError) as err:
        raise ConfigError(f"{path}: damaged plan file ({err})") from None

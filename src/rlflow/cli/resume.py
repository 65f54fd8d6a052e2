"""What ``rlflow train --restore CHECKPOINT_OR_RUN_DIR`` continues: the checkpoint, its run dir,
its config with the flags on top, and the stop criteria over the whole run.

A run dir resolves to its latest ``checkpoint_N``. The config is the checkpoint's, overridden by
``--config FILE`` fields, ``--num-workers``/``--seed``/``--env`` and ``--set`` (tuned configs are
not applied again); ``--env`` and ALGO, if given, must be the checkpoint's. The stop criteria are
the ``--stop-*`` flags (and ``--config``'s), or without any the run's ``config.yaml`` ones; since
the trainer's iteration, env-step and time counters come back from the checkpoint, they count
over the whole run. A checkpoint or run dir in object storage (``s3://``, ``gs://``) resolves
to its latest complete checkpoint (`rlflow.checkpoint.latest_checkpoint`), and the run
continues in that run dir there.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from rlflow import storage
from rlflow.cli.output import make_run_dir
from rlflow.cli.resolve import RunSpec, parse_sets, stop_criteria
from rlflow.config.files import coerce_field, load_config_file
from rlflow.errors import ConfigError

__all__ = ["PROGRESS_FILE", "ResumeSpec", "prepare_progress", "resolve_resume"]

PROGRESS_FILE = "progress.jsonl"
"""One JSON result per line, per iteration, in a run dir."""


class ResumeSpec(NamedTuple):
    """A resumed run: where it continues from and what it runs."""

    checkpoint: Path | str
    """The checkpoint directory restored (a URI as a string)."""
    state: dict[str, Any]
    """Its trainer state (`rlflow.checkpoint.load_checkpoint`)."""
    run_dir: Path | str
    """Where progress is appended and checkpoints go (the checkpoint's run dir)."""
    run: RunSpec
    """The checkpoint's algorithm and config with the flags on top, resolved once (what
    `rlflow.Trainer.restore` is given), and the stop criteria over the whole run."""


def _overrides(
    args: argparse.Namespace, config_cls: Any, saved: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, float]]:
    """Config fields and stop criteria given on the command line (file, flags, ``--set``; a
    dotted ``--set`` merges into the ``saved`` config's dict field)."""
    file = load_config_file(args.config) if args.config else None
    fields: dict[str, Any] = dict(file.fields) if file else {}
    flags = {"env": args.env, "num_workers": args.num_workers, "seed": args.seed}
    flags["loggers"] = args.logger
    flags["output"] = args.output
    fields.update({k: v for k, v in flags.items() if v is not None})
    fields = {k: coerce_field(config_cls, k, v) for k, v in fields.items()}
    fields.update(parse_sets(config_cls, args.set, base={**saved, **fields}))
    return fields, dict(file.stop) if file else {}


def _run_dir(args: argparse.Namespace, checkpoint: Path | str, algo: str, env: Any) -> Path | str:
    """``--out``, else the checkpoint's run dir, else (a checkpoint saved elsewhere) a new one."""
    parent = storage.parent_of(checkpoint)
    if not args.out and any(
        storage.is_file(storage.join(parent, name)) for name in (PROGRESS_FILE, "config.yaml")
    ):
        return parent if storage.is_remote(parent) else Path(parent)
    return make_run_dir(args.out, algo, env)


def _saved_stop(run_dir: Path | str) -> dict[str, float]:
    """The stop criteria in a run dir's ``config.yaml`` (none if absent or unreadable)."""
    path = storage.join(run_dir, "config.yaml")
    if not storage.is_file(path):
        return {}
    try:
        if not storage.is_remote(path):
            return load_config_file(path).stop
        with tempfile.TemporaryDirectory(prefix="rlflow-resume-") as tmp:
            local = Path(tmp) / "config.yaml"
            storage.download_file(path, local)
            return load_config_file(local).stop
    except ConfigError:
        return {}


def resolve_resume(args: argparse.Namespace) -> ResumeSpec:
    """Checkpoint, run dir, config and stop criteria of ``--restore``; ConfigError if bad."""
    from rlflow.algorithms import get_algorithm
    from rlflow.checkpoint import latest_checkpoint, load_checkpoint
    from rlflow.setup import resolve_setup
    from rlflow.trainer_state import restore_arguments

    checkpoint = latest_checkpoint(args.restore)
    state = load_checkpoint(checkpoint)
    spec = get_algorithm(state["algorithm"])
    if args.algo and get_algorithm(args.algo).name != spec.name:
        raise ConfigError(
            f"--restore {args.restore!r}: the checkpoint is a {spec.name!r} run, not "
            f"{args.algo!r}; drop ALGO or start a new run"
        )
    fields, file_stop = _overrides(args, spec.config_cls, state["config"])
    kwargs = restore_arguments(state, fields)
    kwargs.pop("plan", None)
    setup = resolve_setup(spec, kwargs)
    run_dir = _run_dir(args, checkpoint, spec.name, setup.config.env)
    stop = stop_criteria(args, file_stop) or _saved_stop(run_dir)
    return ResumeSpec(checkpoint, state, run_dir, RunSpec(setup, stop))


def _iteration(line: str) -> int | None:
    try:
        value = json.loads(line).get("iteration")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def prepare_progress(run_dir: Path | str, state: dict[str, Any]) -> dict[str, Any]:
    """Make ``progress.jsonl`` end at the checkpoint's iteration; return the run's last result.

    Lines after the checkpoint (iterations a crash lost) are dropped, so the resumed run's
    lines follow on; the file is rewritten only then. The last result is that line at the
    checkpoint's iteration, or (no such line) the checkpoint's counters.
    """
    iteration = int(state["iteration"])
    counters = state.get("metrics", {}).get("counters", {})
    last: dict[str, Any] = {
        "iteration": iteration,
        "time_total_s": float(state["time_total_s"]),
        "num_env_steps_sampled": int(counters.get("num_env_steps_sampled", 0)),
    }
    path = storage.join(run_dir, PROGRESS_FILE)
    if not storage.is_file(path):
        return last
    lines = storage.read_text(path).splitlines()
    kept = [line for line in lines if (i := _iteration(line)) is not None and i <= iteration]
    if len(kept) != len(lines):
        text = "".join(line + "\n" for line in kept)
        if storage.is_remote(path):
            storage.write_text(path, text)  # one upload: the object is replaced whole
        else:
            tmp = Path(path).with_name(PROGRESS_FILE + ".tmp")
            tmp.write_text(text)
            tmp.replace(path)
    if kept and _iteration(kept[-1]) == iteration:
        last = dict(json.loads(kept[-1]))
    return last

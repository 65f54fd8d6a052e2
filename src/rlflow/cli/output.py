"""What ``rlflow train`` writes: progress lines, the summary, the run dir and its files."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from rlflow import storage
from rlflow.cli.resolve import is_number
from rlflow.errors import ConfigError
from rlflow.loggers import jsonable

__all__ = ["fmt", "jsonable", "make_run_dir", "progress_line", "summary", "write_yaml"]


def fmt(value: Any, spec: str) -> str:
    """``format(value, spec)``, or a dash of the same width for None/NaN."""
    if not is_number(value) or math.isnan(value):
        return "-".rjust(int(spec.split(".")[0] or 0))
    return format(value, spec)


def progress_line(result: Mapping[str, Any]) -> str:
    """One line per training iteration: return, env steps, throughput, time, the evaluation's
    return in an iteration that evaluated, per-policy (with
    self-play: the learners only, and their win / draw rates against a random legal player
    when they were measured)."""
    line = (
        f"iter {result['iteration']:4d} | return {fmt(result['episode_return_mean'], '8.2f')} | "
        f"env steps {result['num_env_steps_sampled']:9d} | "
        f"{fmt(result.get('env_steps_per_s'), '8.0f')} steps/s | "
        f"{result['time_total_s']:7.1f} s"
    )
    evaluated = result.get("evaluation/episode_return_mean")
    if is_number(evaluated):
        line += f" | eval return {fmt(evaluated, '.2f')}"
    self_play = result.get("self_play")
    learners = self_play if isinstance(self_play, Mapping) else {}
    per_policy = result.get("policy_reward_mean")
    if isinstance(per_policy, Mapping) and per_policy:
        shown = [(p, v) for p, v in per_policy.items() if not learners or p in learners]
        line += " | " + " ".join(f"{pid} {fmt(v, '.1f')}" for pid, v in shown)
    for pid, stats in learners.items():
        rates = stats.get("vs_random") if isinstance(stats, Mapping) else None
        if rates:
            line += f" | {pid} vs random: win {rates['win_rate']:.2f} draw {rates['draw_rate']:.2f}"
    return line


def make_run_dir(out: str | None, algo: str, env: Any) -> Path | str:
    """Create ``out``, or a fresh ``runs/<algo>_<env>_<time>`` dir; ConfigError if it cannot.
    An ``out`` in object storage (``s3://``, ``gs://``) is checked and returned as it is (a
    prefix needs no creating)."""
    if out and storage.is_remote(out):
        return storage.probe(out, "--out").rstrip("/")
    if out:
        path = storage.local_path(out)
    else:
        env_name = re.sub(r"[^\w.\-]+", "-", env if isinstance(env, str) else "env")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = Path("runs") / f"{algo}_{env_name}_{stamp}"
        n = 1
        while path.exists():
            n += 1
            path = Path("runs") / f"{algo}_{env_name}_{stamp}_{n}"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"--out {str(path)!r}: cannot create the run dir ({err})") from None
    return path


def summary(
    out: IO[str],
    trainer: Any,
    result: Mapping[str, Any] | None,
    reason: str,
    ckpt: Path | str,
    d: Path | str,
) -> None:
    """Write the end-of-run lines: why it stopped, totals (the mean return, or the evaluation's
    when no episode was sampled), checkpoint and run dir."""
    key, ret = "episode_return_mean", "nan"
    if result:
        if not is_number(result[key]) and is_number(result.get("evaluation/" + key)):
            key = "evaluation/" + key  # an offline run samples no episodes
        ret = fmt(result[key], ".2f")
    steps = result["num_env_steps_sampled"] if result else 0
    elapsed = result["time_total_s"] if result else 0.0
    out.write(
        f"done ({reason}): {trainer.iteration} iterations, {steps} env steps in {elapsed:.1f} s, "
        f"{key} {ret}\ncheckpoint: {ckpt}\nresults: {d}\n"
    )


def write_yaml(path: Path | str, data: Mapping[str, Any]) -> None:
    """Write ``data`` (made `jsonable`) to ``path`` (a local path or a storage URI) as YAML,
    keys in order."""
    import yaml

    storage.write_text(path, yaml.safe_dump(jsonable(data), sort_keys=False))

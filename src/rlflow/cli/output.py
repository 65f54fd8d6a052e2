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

__all__ = [
    "evaluation_games",
    "fmt",
    "game_line",
    "jsonable",
    "make_run_dir",
    "progress_line",
    "seat_outcomes",
    "summary",
    "write_yaml",
]


def fmt(value: Any, spec: str) -> str:
    """``format(value, spec)``, or a dash of the same width for None/NaN."""
    if not is_number(value) or math.isnan(value):
        return "-".rjust(int(spec.split(".")[0] or 0))
    return format(value, spec)


def progress_line(result: Mapping[str, Any]) -> str:
    """One line per training iteration, led by what measures the run: the return; in a
    self-play game (a zero-sum game's mean return is 0) each learner's win / draw / loss rates
    against a random legal player (the latest measurement: by seat when measured in this
    iteration, else the iteration it was measured in) and against its pool in training
    (`game_line`); in another zero-sum game each seat's win / draw / loss rates in training
    (`seat_outcomes`); with teams (``team_return_mean`` in the result) each team's return. Then
    env steps, throughput, time, the evaluation's return in an iteration that evaluated, and
    the per-policy returns (not in self-play)."""
    self_play = result.get("self_play")
    learners = self_play if isinstance(self_play, Mapping) else {}
    teams = result.get("team_return_mean")
    if learners:
        head = "; ".join(game_line(pid, stats) for pid, stats in learners.items())
    elif (seats := seat_outcomes(result)) is not None:
        head = seats
    elif isinstance(teams, Mapping) and teams:
        head = "team return " + " ".join(f"{t} {fmt(v, '.2f')}" for t, v in teams.items())
    else:
        head = f"return {fmt(result['episode_return_mean'], '8.2f')}"
    line = (
        f"iter {result['iteration']:4d} | {head} | "
        f"env steps {result['num_env_steps_sampled']:9d} | "
        f"{fmt(result.get('env_steps_per_s'), '8.0f')} steps/s | "
        f"{result['time_total_s']:7.1f} s"
    )
    evaluated = result.get("evaluation/episode_return_mean")
    if is_number(evaluated):
        line += f" | eval return {fmt(evaluated, '.2f')}"
    per_policy = result.get("policy_reward_mean")
    if isinstance(per_policy, Mapping) and per_policy and not learners:
        line += " | " + " ".join(f"{pid} {fmt(v, '.1f')}" for pid, v in per_policy.items())
    return line


def seat_outcomes(result: Mapping[str, Any]) -> str | None:
    """Each seat's win / draw / loss rates over a zero-sum game's episodes (``agent_wins``,
    ``agent_draws``, ``agent_losses`` of a result or an evaluation), or None when the episodes
    are not those of a zero-sum game: every episode's return (summed over its agents) 0, and
    some agent won or lost.

    >>> seat_outcomes({"episode_return_min": 0.0, "episode_return_max": 0.0,
    ...                "agent_wins": {"x": 3, "o": 1}, "agent_draws": {"x": 0, "o": 0},
    ...                "agent_losses": {"x": 1, "o": 3}})
    'win/draw/loss by seat x 0.75/0.00/0.25, o 0.25/0.00/0.75'
    """
    counts = [result.get(k) for k in ("agent_wins", "agent_draws", "agent_losses")]
    wins, draws, losses = (c if isinstance(c, Mapping) else {} for c in counts)
    if not wins or result.get("episode_return_min") != 0 or result.get("episode_return_max") != 0:
        return None
    if not any(wins.values()) and not any(losses.values()):
        return None
    parts = []
    for seat, won in wins.items():
        n = [won, draws.get(seat, 0), losses.get(seat, 0)]
        total = sum(n) or 1
        parts.append(f"{seat} " + "/".join(f"{c / total:.2f}" for c in n))
    return "win/draw/loss by seat " + ", ".join(parts)


def _wdl(rates: Mapping[str, Any]) -> str:
    """``"win/draw/loss"`` rates as ``0.70/0.10/0.20`` (dashes when not measured)."""
    return "/".join(fmt(rates.get(k), ".2f") for k in ("win_rate", "draw_rate", "loss_rate"))


def game_line(policy_id: str, stats: Any) -> str:
    """A self-play learner's part of the progress line, from its ``self_play/<policy>``
    result (`rlflow.ops.self_play.SnapshotPolicies`): its win/draw/loss rates against a random
    legal player (by seat when measured in this iteration, else with the iteration they were
    measured in; dashes before the first measurement) and against its pool in training.

    >>> game_line("p", {"win_rate": 0.7, "draw_rate": 0.1, "loss_rate": 0.2, "measured_at": 4,
    ...                 "vs_pool": {"win_rate": 0.5, "draw_rate": 0.0, "loss_rate": 0.5}})
    'p win/draw/loss vs random 0.70/0.10/0.20 (iter 4), vs pool 0.50/0.00/0.50'
    """
    stats = stats if isinstance(stats, Mapping) else {}
    text = f"{policy_id} win/draw/loss vs random {_wdl(stats)}"
    measured = stats.get("vs_random")
    if isinstance(measured, Mapping) and measured.get("seats"):
        seats = ", ".join(f"{s} {_wdl(r)}" for s, r in measured["seats"].items())
        text = f"{policy_id} win/draw/loss vs random {_wdl(measured)} ({seats})"
    elif stats.get("measured_at"):
        text += f" (iter {stats['measured_at']})"
    vs_pool = stats.get("vs_pool")
    if isinstance(vs_pool, Mapping):
        text += f", vs pool {_wdl(vs_pool)}"
    return text


def evaluation_games(what: str, stats: Mapping[str, Any], mode: str) -> str:
    """``rlflow evaluate``'s lines for a self-play game (`rlflow.Trainer.evaluate` with
    ``self_play``): per learner, its win / draw / loss rates against a random legal player and
    against its newest snapshot, overall and by seat; ``what`` names the run, ``mode`` the
    learner's actions against the random player (greedy or stochastic)."""
    lines = [f"{what}: win/draw/loss rates ({mode} against the random legal player)"]
    opponents = (("vs_random", "vs random"), ("vs_previous", "vs newest snapshot"))
    for pid, games in stats["self_play"].items():
        for key, name in opponents:
            rates = games[key]
            seats = ", ".join(f"{s} {_wdl(r)}" for s, r in rates["seats"].items())
            lines.append(
                f"  {pid} {name}: win {fmt(rates['win_rate'], '.2f')} draw "
                f"{fmt(rates['draw_rate'], '.2f')} loss {fmt(rates['loss_rate'], '.2f')} in "
                f"{rates['games']} games (by seat: {seats})"
            )
    return "\n".join(lines) + "\n"


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
    when no episode was sampled; a self-play game's headline ``win_rate`` against a random
    legal player), checkpoint and run dir."""
    key, ret = "episode_return_mean", "nan"
    if result:
        if not is_number(result[key]) and is_number(result.get("evaluation/" + key)):
            key = "evaluation/" + key  # an offline run samples no episodes
        if "self_play" in result and "win_rate" in result:
            key = "win_rate"  # a zero-sum game's mean return is 0
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

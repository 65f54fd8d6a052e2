"""``rlflow plot RUN_DIR [RUN_DIR ...]``: learning curves of run dirs, in one image.

Each run's ``progress.csv`` (else ``progress.jsonl``) gives the ``x`` and ``y`` columns (nested
keys joined with ``/``); rows where either is not a number are skipped. Runs are grouped by
label (``--label``, else ``<algorithm> <env>`` from the run's ``config.yaml``, else the dir's
name): a group of one is its curve, a larger group (seeds of one config) its mean over the
range all its runs cover, with a band from their min to their max (curves interpolated onto
the union of their x values). matplotlib is an optional extra (``rl-flow[plot]``); the image is
drawn without pyplot, on the Agg canvas, so no display is needed. A run dir, and the image, may be
in object storage (``s3://``, ``gs://``; `rlflow.storage`): its progress files are downloaded.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlflow import storage
from rlflow.errors import ConfigError
from rlflow.loggers import CSV_FILE, JSONL_FILE, read_progress

__all__ = ["Curve", "group_band", "load_curve", "plot_runs", "run_label"]

_INSTALL = 'rlflow plot needs matplotlib: pip install "rl-flow[plot]"'


class Curve(NamedTuple):
    """One run's points, sorted by x (float arrays of one length)."""

    x: np.ndarray
    y: np.ndarray


def run_label(run_dir: Path) -> str:
    """``<algorithm> <env>`` from the run's ``config.yaml``, else the dir's name."""
    import yaml

    try:
        saved = yaml.safe_load((run_dir / "config.yaml").read_text())
        return f"{saved['algorithm']} {saved['config']['env']}"
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return run_dir.resolve().name


def load_curve(run_dir: Path, x: str, y: str) -> Curve:
    """The ``(x, y)`` points of one run dir; ConfigError if it has none."""
    columns = read_progress(run_dir, (x, y))
    xs, ys = np.asarray(columns[x]), np.asarray(columns[y])
    keep = np.isfinite(xs) & np.isfinite(ys)
    if not keep.any():
        raise ConfigError(f"{str(run_dir)!r}: no row has numbers in both {x!r} and {y!r}")
    order = np.argsort(xs[keep], kind="stable")
    return Curve(xs[keep][order], ys[keep][order])


def group_band(curves: Sequence[Curve]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x, mean, min, max)`` of curves on the union of their x values within the range every
    curve covers (without a common range: the whole union, ends held flat).

    >>> a, b = Curve(np.array([0.0, 2.0]), np.array([0.0, 2.0])), Curve(np.array([1.0, 3.0]),
    ...                                                                   np.array([3.0, 5.0]))
    >>> [v.tolist() for v in group_band([a, b])]
    [[1.0, 2.0], [2.0, 3.0], [1.0, 2.0], [3.0, 4.0]]
    """
    grid = np.unique(np.concatenate([c.x for c in curves]))
    low, high = max(c.x[0] for c in curves), min(c.x[-1] for c in curves)
    if low <= high:
        grid = grid[(grid >= low) & (grid <= high)]
    ys = np.stack([np.interp(grid, c.x, c.y) for c in curves])
    return grid, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def _figure() -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(_INSTALL) from None
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _groups(run_dirs: Sequence[str | Path], labels: Sequence[str] | None) -> dict[str, list[Path]]:
    paths = [Path(d) for d in run_dirs]
    if labels and len(labels) != len(paths):
        raise ConfigError(
            f"--label given {len(labels)} times for {len(paths)} run dirs: give one per run dir"
        )
    groups: dict[str, list[Path]] = {}
    for path, label in zip(paths, labels or [run_label(p) for p in paths], strict=True):
        groups.setdefault(label, []).append(path)
    return groups


def _local_run_dir(run_dir: str | Path, tmp: Path, index: int) -> str | Path:
    """``run_dir``, or for one in object storage a local copy of its progress files."""
    if not storage.is_remote(run_dir):
        return run_dir
    uri = storage.check_location(run_dir, "run dir").rstrip("/")
    local = tmp / str(index) / storage.name_of(uri)
    for name in ("config.yaml", CSV_FILE, JSONL_FILE):
        if storage.is_file(storage.join(uri, name)):
            storage.download_file(storage.join(uri, name), local / name)
    if not local.is_dir():
        raise ConfigError(f"{uri!r}: no {CSV_FILE} or {JSONL_FILE} there (not a run dir)")
    return local


def plot_runs(
    run_dirs: Sequence[str | Path],
    *,
    x: str = "num_env_steps_sampled",
    y: str = "episode_return_mean",
    out: str | Path = "plot.png",
    labels: Sequence[str] | None = None,
) -> Path | str:
    """Draw the runs' ``y`` over ``x`` into the image ``out`` (format from its suffix); return
    its path (a URI as a string). ConfigError without matplotlib, for a dir that is no run dir
    or lacks a column. Run dirs and ``out`` may be object-storage URIs."""
    figure = _figure()
    with tempfile.TemporaryDirectory(prefix="rlflow-plot-") as tmp:
        local = [_local_run_dir(d, Path(tmp), i) for i, d in enumerate(run_dirs)]
        _draw(figure, _groups(local, labels), x, y)
        if storage.is_remote(out):
            image = Path(tmp) / storage.name_of(out)
            figure.savefig(image, dpi=120)
            storage.upload_file(image, out)
            return str(out)
    path = Path(out)
    figure.savefig(path, dpi=120)
    return path


def _draw(figure: Any, groups: dict[str, list[Path]], x: str, y: str) -> None:
    axes = figure.add_subplot()
    for label, paths in groups.items():
        curves = [load_curve(p, x, y) for p in paths]
        if len(curves) == 1:
            axes.plot(curves[0].x, curves[0].y, label=label)
            continue
        grid, mean, low, high = group_band(curves)
        (line,) = axes.plot(grid, mean, label=f"{label} (mean of {len(curves)}, min/max)")
        axes.fill_between(grid, low, high, color=line.get_color(), alpha=0.25, linewidth=0)
    axes.set_xlabel(x)
    axes.set_ylabel(y)
    axes.grid(alpha=0.3)
    axes.legend()

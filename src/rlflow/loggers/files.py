"""The file loggers of a run dir: ``progress.jsonl`` and ``progress.csv``, and reading them back.

Both write one line (row) per `rlflow.Trainer.train` result and flush it, so a crash loses at
most the iteration in flight. Opened at iteration ``start`` (1 for a new run, N+1 for a run
restored at iteration N), they keep the lines of iterations before ``start`` and drop later
ones (iterations a crash lost), so a resumed run follows on.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rlflow.errors import ConfigError

__all__ = [
    "CSV_FILE",
    "JSONL_FILE",
    "CsvLogger",
    "JsonlLogger",
    "flatten",
    "jsonable",
    "read_progress",
]

JSONL_FILE = "progress.jsonl"
"""One JSON result per line, per iteration."""
CSV_FILE = "progress.csv"
"""One flat row per iteration; nested keys joined with ``/``."""


def jsonable(value: Any) -> Any:
    """A JSON-safe copy: numpy scalars/arrays to Python, NaN/inf to None, others to str."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist):
        return jsonable(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int | str):
        return value
    return getattr(value, "__qualname__", None) or repr(value)


def flatten(result: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``result`` with nested mappings flattened, their keys joined with ``/`` (depth first, in
    order): ``{"info": {"lr": 0.1}}`` -> ``{"info/lr": 0.1}``. Leaves are kept as they are.

    >>> flatten({"a": 1, "info": {"learner": {"p0": {"loss": 0.5}}}, "b": None})
    {'a': 1, 'info/learner/p0/loss': 0.5, 'b': None}
    """
    flat: dict[str, Any] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "/"))
        else:
            flat[name] = value
    return flat


def _iteration(row: Mapping[str, Any]) -> int | None:
    try:
        return int(row["iteration"])
    except (KeyError, TypeError, ValueError):
        return None


def _keep_before(rows: list[Any], start: int) -> list[Any]:
    """The rows of iterations before ``start`` (rows without one are dropped)."""
    return [r for r in rows if (i := _iteration(r)) is not None and i < start]


class JsonlLogger:
    """Appends each result as one JSON line (made `jsonable`) to ``logdir/progress.jsonl``."""

    def __init__(self, logdir: Path, start: int) -> None:
        path = logdir / JSONL_FILE
        if path.is_file():
            lines = path.read_text().splitlines()
            kept = _keep_before([_parse(line) for line in lines], start)
            if len(kept) != len(lines):
                _replace(path, "".join(json.dumps(r) + "\n" for r in kept))
        else:
            path.write_text("")
        self._file = path.open("a")

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Append ``result`` as one line and flush."""
        self._file.write(json.dumps(jsonable(result), allow_nan=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def _parse(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a sibling temp file, then rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _cell(value: Any) -> Any:
    """A CSV cell: numbers and strings as they are, None/NaN empty, lists as JSON."""
    value = jsonable(value)
    if value is None:
        return ""
    return json.dumps(value) if isinstance(value, list) else value


class CsvLogger:
    """Writes each result, `flatten`-ed, as one row of ``logdir/progress.csv``.

    The header is the first result's keys in order; a later result with a new key adds a column
    at the end (the file is rewritten once then, earlier rows empty in it).
    """

    def __init__(self, logdir: Path, start: int) -> None:
        self._path = logdir / CSV_FILE
        self._columns: list[str] = []
        self._rows: list[dict[str, Any]] = []
        if self._path.is_file():
            with self._path.open(newline="") as f:
                reader = csv.DictReader(f)
                self._columns = list(reader.fieldnames or [])
                self._rows = _keep_before(list(reader), start)
        self._rewrite()

    def _rewrite(self) -> None:
        tmp = self._path.with_name(self._path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, self._columns)
            if self._columns:
                writer.writeheader()
            writer.writerows(self._rows)
        tmp.replace(self._path)

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Write ``result`` as one row and flush (a new key: rewrite with a new column)."""
        row = {k: _cell(v) for k, v in flatten(result).items()}
        self._rows.append(row)
        new = [k for k in row if k not in self._columns]
        if new or not self._columns:
            self._columns.extend(new)
            self._rewrite()
            return
        with self._path.open("a", newline="") as f:
            csv.DictWriter(f, self._columns).writerow(row)

    def close(self) -> None:
        """Nothing to release: every row is on disk already."""


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    if path.name.endswith(".csv"):
        with path.open(newline="") as f:
            yield from csv.DictReader(f)
    else:
        for line in path.read_text().splitlines():
            if line.strip():
                yield flatten(json.loads(line))


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def read_progress(run_dir: Path, keys: tuple[str, ...]) -> dict[str, list[float]]:
    """The columns ``keys`` of a run dir's ``progress.csv`` (else ``progress.jsonl``, flattened)
    as floats, NaN where a row has no number. ConfigError if there is neither file or a key is
    in no row (the message lists the keys there are)."""
    path = next((p for p in (run_dir / CSV_FILE, run_dir / JSONL_FILE) if p.is_file()), None)
    if path is None:
        raise ConfigError(f"{str(run_dir)!r}: no {CSV_FILE} or {JSONL_FILE} there (not a run dir)")
    rows = list(_rows(path))
    seen = {k for row in rows for k in row}
    for key in keys:
        if key not in seen:
            raise ConfigError(
                f"{str(path)!r} has no column {key!r}; it has: {', '.join(sorted(seen)) or 'none'}"
            )
    return {key: [_number(row.get(key)) for row in rows] for key in keys}

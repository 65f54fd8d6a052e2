"""`OfflineConfig`: the field group of recorded experience: where sampled batches are written
(``output``) and where a plan reads experience from (``input``).

One of the groups `rlflow.config.AlgorithmConfig` is built from. The files and their readers
are `rlflow.offline`; the offline algorithms (``bc``, ``marwil``) read ``input``.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rlflow import storage
from rlflow.config.group import FieldGroup
from rlflow.errors import ConfigError

__all__ = ["SAMPLER", "OfflineConfig", "experience_files"]

SAMPLER = "sampler"
"""The value of ``input`` that means the rollout workers' live samples."""


def _remote_files_of(item: str, label: str) -> list[str]:
    """The files a folder, file or glob in object storage names (`rlflow.storage`)."""
    uri = storage.check_location(item, label).rstrip("/")
    if not any(c in uri for c in "*?["):
        if storage.is_file(uri):
            return [uri]
        names = storage.list_files(uri)
        found = [
            storage.join(uri, n)
            for n in names
            if n.endswith(".parquet") and not any(p.startswith(".") for p in n.split("/"))
        ]
        if found:
            return found
        what = "the folder holds no .parquet files" if names else "no such folder or file"
        raise ConfigError(f"{label}={item!r}: {what}")
    base = uri[: min(uri.index(c) for c in "*?[" if c in uri)].rpartition("/")[0]
    matches = [
        storage.join(base, n)
        for n in storage.list_files(base)
        if fnmatch.fnmatchcase(storage.join(base, n), uri)
        and not n.rpartition("/")[2].startswith(".")
    ]
    if not matches:
        raise ConfigError(f"{label}={item!r}: no file in object storage matches it")
    return matches


def _files_of(item: str, label: str) -> list[Path] | list[str]:
    if storage.is_remote(item):
        return _remote_files_of(item, label)
    path = storage.local_path(item).expanduser()
    if path.is_dir():
        found = [p for p in path.rglob("*.parquet") if not p.name.startswith(".")]
        if not found:
            raise ConfigError(f"{label}={item!r}: the folder holds no .parquet files")
        return sorted(found)
    if path.is_file():
        return [path]
    matches = sorted(Path(m) for m in glob.glob(os.path.expanduser(item), recursive=True))
    found = [m for m in matches if m.is_file() and not m.name.startswith(".")]
    if not found:
        raise ConfigError(f"{label}={item!r}: no such folder or file, and no file matches it")
    return found


def experience_files(
    spec: str | os.PathLike[str] | Sequence[str], label: str = "input"
) -> list[Path | str]:
    """The files an ``input`` names: each folder's ``*.parquet`` files (recursively, hidden
    ones left out), each glob's matches, each file; in that order, duplicates dropped.
    `ConfigError` naming ``label`` when an item names nothing. An item may be an ``s3://`` /
    ``gs://`` URI (`rlflow.storage`): its files are URIs (strings)."""
    items = [os.fspath(spec)] if isinstance(spec, str | os.PathLike) else list(spec)
    if not items:
        raise ConfigError(f"{label}=[]: name at least one folder, glob or file")
    files: dict[Path | str, None] = {}
    for item in items:
        if not isinstance(item, str | os.PathLike):
            raise ConfigError(f"{label}: {item!r} is not a path or glob")
        for path in _files_of(os.fspath(item), label):
            files.setdefault(path if isinstance(path, str) else path.resolve(), None)
    return list(files)


@dataclass(frozen=True, kw_only=True)
class OfflineConfig(FieldGroup):
    """Where sampled experience is written and where recorded experience is read from."""

    output: str | None = None
    """A folder, local or in object storage (``s3://``, ``gs://``, ``file://``;
    `rlflow.storage`): every batch the rollout workers sample is also written there as Parquet
    files (`rlflow.offline.ExperienceWriter`, needs ``pip install "rl-flow[offline]"``). None:
    not written. CLI: ``--output DIR``."""
    output_max_rows_per_file: int = 10_000
    """Rows (of one policy) per written file, >= 1; a worker's last file holds the rest."""
    input: str | list[str] = SAMPLER
    """Where the offline algorithms (``bc``, ``marwil``) read experience: a folder (its
    ``*.parquet`` files, recursively), a glob, a file, or a list of them; ``"sampler"``: the
    rollout workers (what online algorithms always use). Each may be an ``s3://`` / ``gs://``
    URI (`rlflow.storage`). Checked when the config is built: each item must name at least one
    file."""
    num_input_readers: int = 1
    """Reader shards that read and decode ``input``'s files in parallel (an actor each on Ray),
    >= 1; at most one per file."""
    input_mix: dict[str, float] | None = None
    """Several sources mixed: ``{"sampler": 0.5, "data/": 0.5}`` (RLlib's shape) takes batches
    from each key (``"sampler"``: the rollout workers; else a folder, glob or file of recorded
    experience) in turn, in those proportions (of batches: a sampling round, or one recorded
    batch); weights > 0. Replaces ``input`` (which must stay ``"sampler"``). Read by the plans
    that take their experience from `rlflow.ops.offline.experience` (DQN, SAC, TD3 fill their
    replay from it; bc and marwil). None: ``input`` alone."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.output is not None and not isinstance(self.output, str | os.PathLike):
            raise self._bad("output", "must be a folder path or None")
        if self.output is not None:
            storage.check_location(self.output, self._label("output"))
        self._check_int("output_max_rows_per_file", 1)
        self._check_int("num_input_readers", 1)
        if self.input != SAMPLER:
            experience_files(self.input, self._label("input"))
        if self.input_mix is not None:
            self._check_input_mix()

    def _check_input_mix(self) -> None:
        mix = self.input_mix
        if not isinstance(mix, dict) or not mix:
            raise self._bad("input_mix", "must be a non-empty dict of source -> weight")
        if self.input != SAMPLER:
            raise self._bad("input", "must be 'sampler' when input_mix names the sources")
        for key, weight in mix.items():
            label = f"{self._label('input_mix')}[{key!r}]"
            if not isinstance(key, str):
                raise self._bad("input_mix", f"has key {key!r}: 'sampler' or a path or glob")
            if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
                raise ConfigError(f"{label}={weight!r}: the weight must be a number > 0")
            if key != SAMPLER:
                experience_files(key, label)

    def recorded_sources(self) -> list[str | list[str]]:
        """The recorded sources a plan reads: ``input_mix``'s paths, else ``input`` (none when
        both name only the sampler)."""
        if self.input_mix is not None:
            return [key for key in self.input_mix if key != SAMPLER]
        return [self.input] if self.input != SAMPLER else []

    def reads_recorded(self) -> bool:
        """True when ``input`` or ``input_mix`` names recorded files."""
        return bool(self.recorded_sources())

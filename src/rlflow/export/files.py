"""The files of an exported policy: ``policy.json`` (the spec) and ``weights.pt`` (tensors).

The weights are a flat ``{name: tensor}`` dict written with ``torch.save`` and read with
``torch.load(weights_only=True)``: torch's restricted unpickler, which builds tensors and plain
containers only and refuses any other pickled object, so loading never runs code from the
file. A directory is written next to its final place and renamed into it, so a reader never
sees half an export. An export in object storage (``s3://``, ``gs://``; `rlflow.storage`) is
written locally, then uploaded with ``policy.json`` last; reading downloads it first.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from rlflow import storage
from rlflow.errors import ConfigError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "READ_VERSIONS",
    "SPEC_FILE",
    "TEAM_FILE",
    "TEAM_FORMAT",
    "WEIGHTS_FILE",
    "read_export",
    "write_export",
    "write_team_export",
]

FORMAT = "rlflow-policy"
"""The ``format`` field of every ``policy.json``."""
FORMAT_VERSION = 2
"""The ``format_version`` this rlflow writes. 2 added ``observation_filter`` (a reader that
ignored it would act on unfiltered observations, so readers of 1 refuse it)."""
READ_VERSIONS = (1, 2)
"""The ``format_version`` values this rlflow reads (1: no observation filter)."""
SPEC_FILE = "policy.json"
"""The spec's file name inside an export directory."""
WEIGHTS_FILE = "weights.pt"
"""The weights' file name inside an export directory."""
TEAM_FILE = "team.json"
"""The file of a team's export directory (one sub-directory per member)."""
TEAM_FORMAT = "rlflow-team"
"""The ``format`` field of every ``team.json``."""


def _write_files(directory: Path, spec: dict[str, Any], weights: dict[str, Any]) -> None:
    text = json.dumps({"format": FORMAT, "format_version": FORMAT_VERSION, **spec}, indent=2)
    (directory / SPEC_FILE).write_text(text + "\n")
    tensors = {str(k): torch.as_tensor(np.array(v)) for k, v in weights.items()}
    torch.save(tensors, directory / WEIGHTS_FILE)


def write_export(path: str | Path, spec: dict[str, Any], weights: dict[str, Any]) -> str:
    """Write ``spec`` (JSON-able) and ``weights`` (``{name: array}``) as the directory
    ``path``; return its path. An export already there is replaced once the new one is
    complete; anything else there is a `ConfigError`. A ``path`` in object storage gets the
    weights first and ``policy.json`` last."""
    if storage.is_remote(path):
        return upload_export(path, lambda local: write_export(local, spec, weights))
    return _write_directory(storage.local_path(path), lambda tmp: _write_files(tmp, spec, weights))


def write_team_export(
    path: str | Path,
    team: dict[str, Any],
    members: dict[str, tuple[dict[str, Any], dict[str, Any]]],
) -> str:
    """Write a team's export as the directory ``path``: ``team.json`` (``team``, JSON-able,
    with the members' ids) and one export directory per member, ``<path>/<agent_id>/``
    (``members``: agent id -> its spec and weights, as `write_export` takes them); return its
    path. Replaces an export (a team's or a policy's) already there once complete; in object
    storage ``team.json`` goes last."""
    if storage.is_remote(path):
        return upload_export(path, lambda local: write_team_export(local, team, members))

    def write(tmp: Path) -> None:
        record = {"format": TEAM_FORMAT, "format_version": FORMAT_VERSION, **team}
        (tmp / TEAM_FILE).write_text(json.dumps(record, indent=2) + "\n")
        for agent, (spec, weights) in members.items():
            if not agent or Path(agent).name != agent or agent in (".", ".."):
                raise ConfigError(
                    f"export_policy: member id {agent!r} cannot name a directory; rename it"
                )
            (tmp / agent).mkdir()
            _write_files(tmp / agent, spec, weights)

    return _write_directory(storage.local_path(path), write)


def upload_export(path: str | Path, write_local: Any, label: str = "export_policy") -> str:
    """Write an export (a policy's or a team's) to a local staging folder with
    ``write_local(folder) -> its path``, then upload it to the object-storage ``path``, its
    spec file (``policy.json``, or a team's ``team.json``) last, an old one there deleted
    first; return the URI. `ConfigError` naming ``label`` when ``path`` holds something other
    than an export."""
    uri: str = storage.check_location(path, label).rstrip("/")
    is_export = storage.is_file(storage.join(uri, SPEC_FILE)) or storage.is_file(
        storage.join(uri, TEAM_FILE)
    )
    if storage.exists(uri) and not is_export:
        raise ConfigError(f"{label}: {uri!r} exists and is not an exported policy; give a new path")
    with tempfile.TemporaryDirectory(prefix="rlflow-export-") as staging:
        local = Path(write_local(Path(staging) / storage.name_of(uri)))
        marker = TEAM_FILE if (local / TEAM_FILE).is_file() else SPEC_FILE
        storage.delete(storage.join(uri, marker))  # an old export there is incomplete from now
        storage.upload_dir(local, uri, last=[marker])
    return uri


def _write_directory(path: Path, write: Any) -> str:
    """Run ``write(tmp)`` on a fresh directory beside ``path``, then put it at ``path``."""
    if path.exists() and not ((path / SPEC_FILE).is_file() or (path / TEAM_FILE).is_file()):
        raise ConfigError(
            f"export_policy: {str(path)!r} exists and is not an exported policy; give a new path"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        write(tmp)
        if path.exists():
            old = path.with_name(f"{tmp.name}.old")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(path)


def _read_spec(path: Path) -> dict[str, Any]:
    spec_file = path / SPEC_FILE
    if (path / TEAM_FILE).is_file() and not spec_file.is_file():
        members = sorted(p.name for p in path.iterdir() if (p / SPEC_FILE).is_file())
        raise ConfigError(
            f"load_policy: {str(path)!r} is a team's export, one policy per member; load a "
            f"member's: {', '.join(repr(str(path / m)) for m in members)}"
        )
    if not path.is_dir() or not spec_file.is_file():
        what = "no such directory" if not path.exists() else f"no {SPEC_FILE} in it"
        raise ConfigError(
            f"load_policy: {str(path)!r} is not an exported policy ({what}); give the directory "
            "Trainer.export_policy or `rlflow export` wrote"
        )
    try:
        spec = json.loads(spec_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"load_policy: {str(spec_file)!r} is not readable JSON ({err})") from err
    if not isinstance(spec, dict) or spec.get("format") != FORMAT:
        raise ConfigError(f"load_policy: {str(spec_file)!r} is not an {FORMAT} spec")
    if spec.get("format_version") not in READ_VERSIONS:
        raise ConfigError(
            f"load_policy: {str(spec_file)!r} has format_version "
            f"{spec.get('format_version')!r}; this rlflow reads "
            f"{', '.join(map(str, READ_VERSIONS))}"
        )
    return spec


def _read_weights(weights_file: Path) -> dict[str, npt.NDArray[Any]]:
    try:
        loaded = torch.load(weights_file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise ConfigError(
            f"load_policy: refused {str(weights_file)!r}: it holds pickled objects other than "
            f"tensors, and loading them could run code ({err})"
        ) from err
    except (OSError, RuntimeError, EOFError) as err:
        raise ConfigError(f"load_policy: cannot read {str(weights_file)!r} ({err})") from err
    if not isinstance(loaded, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in loaded.items()
    ):
        raise ConfigError(
            f"load_policy: {str(weights_file)!r} is not a dict of named tensors "
            f"(got {type(loaded).__name__})"
        )
    return {k: v.numpy() for k, v in loaded.items()}


def read_export(path: str | Path) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    """The spec and weights of the export directory ``path`` (`ConfigError` naming the file
    for a missing, foreign, damaged or unsafe one). An export in object storage is downloaded
    to a temporary folder first."""
    if storage.is_remote(path):
        uri = storage.check_location(path, "load_policy").rstrip("/")
        with tempfile.TemporaryDirectory(prefix="rlflow-export-") as staging:
            local_dir = Path(staging) / storage.name_of(uri)
            local_dir.mkdir()
            for name in (SPEC_FILE, WEIGHTS_FILE):
                if storage.is_file(storage.join(uri, name)):
                    storage.download_file(storage.join(uri, name), local_dir / name)
            try:
                return read_export(local_dir)
            except ConfigError as err:
                raise ConfigError(str(err).replace(str(local_dir), uri)) from None
    path = storage.local_path(path)
    spec = _read_spec(path)
    return spec, _read_weights(path / WEIGHTS_FILE)

"""Checkpoint files: written atomically by `write_checkpoint`, read defensively by
`load_checkpoint`.

A checkpoint is a directory with two files: :data:`CHECKPOINT_STATE` (the trainer state, pickled
with cloudpickle, so lambdas and functions defined in ``__main__`` are saved by value) and
:data:`CHECKPOINT_META` (small human-readable JSON: a format tag and version, the state file's
size and SHA-256, checked before the pickle is opened). `rlflow.trainer.Trainer.save` /
``restore`` use them; `latest_checkpoint` resolves a run dir to its newest checkpoint.

Writing goes into a hidden temporary directory beside the target (``.NAME.tmp-*``), fsynced, then
renamed into place: a crash or a second Ctrl-C mid-save never leaves a half checkpoint under the
final name, and an old checkpoint at the same path is replaced only once the new one is complete.
Anything wrong on reading (a missing or truncated file, bytes that do not unpickle, a foreign
directory, a newer format) raises `ConfigError` naming the file and what is wrong.

A checkpoint may live in object storage too (``s3://bucket/run/checkpoint_000010``;
`rlflow.storage`), which has no rename: the checkpoint is written locally as above, then its
state file is uploaded and its metadata file last. The metadata file is the marker that the
checkpoint is complete: a checkpoint there without it (a run killed mid-upload) is skipped by
`latest_checkpoint`, and replacing a checkpoint deletes the old marker before the new state
goes up. Reading downloads both files to a temporary folder and checks them as above.

A checkpoint is code: reading one unpickles it, which runs whatever the file says to run. Load
only checkpoints you trust; exports (`rlflow.export`) hold JSON and tensors only and are read
without unpickling anything else (``torch.load(weights_only=True)``).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from rlflow import storage
from rlflow.errors import ConfigError

__all__ = [
    "CHECKPOINT_META",
    "CHECKPOINT_STATE",
    "latest_checkpoint",
    "load_checkpoint",
    "picklable",
    "write_checkpoint",
]

CHECKPOINT_STATE = "trainer_state.pkl"
"""File (in a checkpoint directory) holding the pickled trainer state."""
CHECKPOINT_META = "rlflow_checkpoint.json"
"""File (in a checkpoint directory) holding small human-readable metadata."""
_FORMAT = "rlflow-checkpoint"
_VERSION = 1
_REQUIRED_KEYS = ("algorithm", "config", "iteration")
_CHECKPOINT_NAME = re.compile(r"checkpoint_(\d+)")


def _cloudpickle() -> Any:
    """cloudpickle (a dependency of Gymnasium), imported only when a checkpoint is written.

    Not Ray's vendored copy: importing it imports all of Ray (about 0.9 s), which a run on the
    local backend otherwise never does. Checkpoints written with Ray's copy load as before.
    """
    import cloudpickle

    return cloudpickle


class _HashingWriter:
    """A binary file wrapper that counts and hashes what goes through it."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh, self.size, self.sha256 = fh, 0, hashlib.sha256()

    def write(self, data: Any) -> int:
        self.sha256.update(data)
        written = self.fh.write(data)
        self.size += memoryview(data).nbytes
        return written


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_replaceable(target: Path) -> None:
    """``target`` may be written: absent, an empty dir, or an rlflow checkpoint."""
    if not target.exists():
        return
    if not target.is_dir():
        raise ConfigError(f"checkpoint {str(target)!r}: exists and is not a directory")
    if (target / CHECKPOINT_META).is_file() or not any(target.iterdir()):
        return
    raise ConfigError(
        f"checkpoint {str(target)!r}: the directory exists and is not an rlflow checkpoint; "
        "refusing to replace it (choose another path)"
    )


def _write_state(tmp: Path, state: Mapping[str, Any], target: Path) -> _HashingWriter:
    with (tmp / CHECKPOINT_STATE).open("wb") as fh:
        writer = _HashingWriter(fh)
        try:
            _cloudpickle().Pickler(writer, protocol=pickle.HIGHEST_PROTOCOL).dump(dict(state))
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            raise ConfigError(
                f"checkpoint {str(target)!r}: the trainer state cannot be pickled "
                f"({type(err).__name__}: {err}); every config value (env creator, "
                "policy_mapping_fn, ...) must be picklable by cloudpickle"
            ) from None
        fh.flush()
        os.fsync(fh.fileno())
    return writer


def _move_into_place(tmp: Path, target: Path) -> None:
    """Rename the finished ``tmp`` to ``target``; an old checkpoint there goes only after."""
    if target.exists() and any(target.iterdir()):
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        target.replace(old / target.name)
        tmp.replace(target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.replace(target)  # an empty directory is replaced atomically
    _fsync_dir(target.parent)


def _write_remote(uri: str, state: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    """Write the checkpoint locally, then upload it with its marker (the metadata) last. The
    folder ``uri`` must be absent or hold only a checkpoint's files (complete or not)."""
    uri = storage.check_location(uri, "checkpoint").rstrip("/")
    marker = storage.join(uri, CHECKPOINT_META)
    if not set(storage.list_files(uri)) <= {CHECKPOINT_STATE, CHECKPOINT_META}:
        raise ConfigError(
            f"checkpoint {uri!r}: the folder holds files and is not an rlflow checkpoint; "
            "refusing to replace it (choose another path)"
        )
    with tempfile.TemporaryDirectory(prefix="rlflow-checkpoint-") as tmp:
        local = write_checkpoint(Path(tmp) / storage.name_of(uri), state, meta)
        storage.delete(marker)  # an old checkpoint here is incomplete from now on
        storage.upload_dir(local, uri, last=[CHECKPOINT_META])
    return uri


def write_checkpoint(
    checkpoint_dir: str | Path, state: Mapping[str, Any], meta: Mapping[str, Any]
) -> str:
    """Write ``state`` (cloudpickled) and ``meta`` (JSON, plus format, version, size and
    SHA-256 of the state file) as the checkpoint directory ``checkpoint_dir``; return its path.

    Atomic: everything goes into a temporary directory beside ``checkpoint_dir`` that is
    fsynced and renamed into place; on any error or interrupt it is removed and an existing
    checkpoint at ``checkpoint_dir`` is left as it was. ``checkpoint_dir`` must be absent, empty
    or an rlflow checkpoint (`ConfigError` otherwise, so no user directory is ever replaced);
    state that cannot be pickled is a `ConfigError` too. On object storage (an ``s3://`` or
    ``gs://`` URI) the state file goes up first and the metadata, the completion marker, last.
    """
    if storage.is_remote(checkpoint_dir):
        return _write_remote(str(checkpoint_dir), state, meta)
    target = storage.local_path(checkpoint_dir)
    _check_replaceable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        writer = _write_state(tmp, state, target)
        full_meta = {
            "format": _FORMAT,
            "version": _VERSION,
            "state_bytes": writer.size,
            "state_sha256": writer.sha256.hexdigest(),
            **meta,
        }
        with (tmp / CHECKPOINT_META).open("w") as fh:
            fh.write(json.dumps(full_meta, indent=2) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(tmp)
        _move_into_place(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(target)


def _latest_remote(uri: str) -> str:
    uri = storage.check_location(uri, "checkpoint").rstrip("/")
    if storage.is_file(storage.join(uri, CHECKPOINT_META)):
        return uri
    complete = [
        (int(m.group(1)), top)
        for name in storage.list_files(uri)
        for top, _, rest in [name.partition("/")]
        if rest == CHECKPOINT_META and (m := _CHECKPOINT_NAME.fullmatch(top))
    ]
    if not complete:
        if not storage.exists(uri):
            raise ConfigError(f"{uri!r} does not exist: not an rlflow checkpoint or run dir")
        return uri  # load_checkpoint says what is missing
    return storage.join(uri, max(complete)[1])


def latest_checkpoint(path: str | Path) -> Path | str:
    """``path`` if it is a checkpoint, else (a run dir) its ``checkpoint_N`` with the largest N.

    Raises `ConfigError` if ``path`` does not exist or is neither (not checked further here:
    `load_checkpoint` reads it defensively). On object storage (a URI, returned as a string)
    only complete checkpoints count: those whose metadata file, uploaded last, is there.
    """
    if storage.is_remote(path):
        return _latest_remote(str(path))
    path = storage.local_path(path)
    if not path.exists():
        raise ConfigError(f"{str(path)!r} does not exist: not an rlflow checkpoint or run dir")
    if not path.is_dir() or (path / CHECKPOINT_META).exists():
        return path
    found = [
        (int(m.group(1)), p)
        for p in path.iterdir()
        if p.is_dir() and (m := _CHECKPOINT_NAME.fullmatch(p.name))
    ]
    if (path / CHECKPOINT_STATE).exists() or not found:
        return path  # load_checkpoint says what is missing
    return max(found)[1]


def _read_meta(path: Path) -> dict[str, Any]:
    meta_file, state_file = path / CHECKPOINT_META, path / CHECKPOINT_STATE
    if not meta_file.is_file():
        what = "is empty" if not any(path.iterdir()) else f"has no {CHECKPOINT_META}"
        if (latest := latest_checkpoint(path)) != path:
            what += f" (a run dir? its latest checkpoint is {str(latest)!r})"
        if not state_file.is_file():
            raise ConfigError(
                f"{str(path)!r} is not an rlflow checkpoint: it {what}; a checkpoint holds "
                f"{CHECKPOINT_META} and {CHECKPOINT_STATE}, written by Trainer.save"
            )
        raise ConfigError(f"checkpoint {str(path)!r}: {CHECKPOINT_META} is missing")
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{str(meta_file)!r}: not valid checkpoint metadata ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise ConfigError(
            f"{str(meta_file)!r}: format {found!r} is not {_FORMAT!r}: not an rlflow checkpoint"
        )
    _check_version(meta_file, meta.get("version"))
    if not state_file.is_file():
        raise ConfigError(f"checkpoint {str(path)!r}: {CHECKPOINT_STATE} is missing")
    return meta


def _check_version(meta_file: Path, version: Any) -> None:
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ConfigError(f"{str(meta_file)!r}: version {version!r} is not a format version")
    if version > _VERSION:
        raise ConfigError(
            f"{str(meta_file)!r}: written by a newer rlflow (checkpoint format version "
            f"{version}; this rlflow reads up to version {_VERSION}): upgrade rlflow"
        )


def _check_integrity(state_file: Path, meta: Mapping[str, Any]) -> None:
    """Size and SHA-256 against the metadata (checkpoints written before them have neither)."""
    size = state_file.stat().st_size
    expected = meta.get("state_bytes")
    if isinstance(expected, int) and size != expected:
        raise ConfigError(
            f"{str(state_file)!r}: {size} bytes, the checkpoint metadata says {expected}: the "
            "file is truncated or was changed; use an earlier checkpoint"
        )
    digest = meta.get("state_sha256")
    if isinstance(digest, str):
        with state_file.open("rb") as fh:
            got = hashlib.file_digest(fh, "sha256").hexdigest()
        if got != digest:
            raise ConfigError(
                f"{str(state_file)!r}: SHA-256 does not match the checkpoint metadata: the "
                "file is damaged; use an earlier checkpoint"
            )


def _unpickle(state_file: Path) -> Any:
    try:
        with state_file.open("rb") as fh:
            return pickle.load(fh)
    except (ImportError, AttributeError) as err:
        raise ConfigError(
            f"{str(state_file)!r}: refers to code that cannot be imported here "
            f"({type(err).__name__}: {err}); run where the module that defined it (e.g. the "
            "env creator) is importable"
        ) from None
    except Exception as err:  # noqa: BLE001 - damaged bytes raise many types
        raise ConfigError(
            f"{str(state_file)!r}: cannot unpickle ({type(err).__name__}: {err}): the file is "
            "damaged or not written by rlflow"
        ) from None


def load_checkpoint(checkpoint_dir: str | Path) -> dict[str, Any]:
    """The trainer state of a checkpoint directory (or of its state file), checked.

    Checks, in order, each a `ConfigError` naming the file: the directory exists and holds both
    files; the metadata is rlflow's, of a format version this rlflow reads; the state file has
    the size and SHA-256 recorded at save time; it unpickles (code it refers to is importable);
    it is a trainer state. A checkpoint in object storage is downloaded first; its errors
    name the URI.

    Unpickling runs code the file names (cloudpickle saves functions by value): load only
    checkpoints you trust. The SHA-256 check guards against damage, not against a forged file.
    """
    if storage.is_remote(checkpoint_dir):
        return _load_remote(str(checkpoint_dir))
    path = storage.local_path(checkpoint_dir)
    if path.is_file():
        path = path.parent
    if not path.is_dir():
        raise ConfigError(f"{str(path)!r} does not exist: not an rlflow checkpoint")
    meta = _read_meta(path)
    state_file = path / CHECKPOINT_STATE
    _check_integrity(state_file, meta)
    state = _unpickle(state_file)
    if not isinstance(state, dict):
        raise ConfigError(
            f"{str(state_file)!r}: holds a {type(state).__name__}, not a trainer state"
        )
    if missing := [k for k in _REQUIRED_KEYS if k not in state]:
        raise ConfigError(f"{str(state_file)!r}: not a trainer state (no {', '.join(missing)})")
    return state


def _load_remote(uri: str) -> dict[str, Any]:
    uri = storage.check_location(uri, "checkpoint").rstrip("/")
    if storage.name_of(uri) in (CHECKPOINT_STATE, CHECKPOINT_META):
        uri = storage.parent_of(uri)
    with tempfile.TemporaryDirectory(prefix="rlflow-checkpoint-") as tmp:
        local = Path(tmp) / storage.name_of(uri)
        local.mkdir()
        for name in (CHECKPOINT_META, CHECKPOINT_STATE):
            if storage.is_file(storage.join(uri, name)):
                storage.download_file(storage.join(uri, name), local / name)
        if not any(local.iterdir()):
            if not storage.exists(uri):
                raise ConfigError(f"{uri!r} does not exist: not an rlflow checkpoint")
            if (latest := latest_checkpoint(uri)) != uri:
                raise ConfigError(
                    f"{uri!r} is not an rlflow checkpoint (a run dir? its latest complete "
                    f"checkpoint is {latest!r})"
                )
        try:
            return load_checkpoint(local)
        except ConfigError as err:
            raise ConfigError(str(err).replace(str(local), uri)) from None


def picklable(obj: Any) -> bool:
    """True if ``obj`` pickles with cloudpickle (e.g. a custom plan function worth saving)."""
    try:
        _cloudpickle().dumps(obj)
    except Exception:  # noqa: BLE001 - any failure means "not picklable"
        return False
    return True

"""Checkpoint files: written atomically by `write_checkpoint`, read defensively by
`load_checkpoint`.

A checkpoint is a directory with two files: :data:`CHECKPOINT_STATE` (the pickled trainer state)
and :data:`CHECKPOINT_META` (small human-readable JSON metadata with a format tag and version,
checked before the pickle is opened). `rlflow.trainer.Trainer.save` / ``restore`` use them.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlflow.errors import ConfigError

__all__ = ["CHECKPOINT_META", "CHECKPOINT_STATE", "load_checkpoint", "write_checkpoint"]

CHECKPOINT_STATE = "trainer_state.pkl"
"""File (in a checkpoint directory) holding the pickled trainer state."""
CHECKPOINT_META = "rlflow_checkpoint.json"
"""File (in a checkpoint directory) holding small human-readable metadata."""
_FORMAT = "rlflow-checkpoint"
_VERSION = 1


def write_checkpoint(
    checkpoint_dir: str | Path, state: Mapping[str, Any], meta: Mapping[str, Any]
) -> str:
    """Write ``state`` (pickled) and ``meta`` (JSON, plus format and version) into
    ``checkpoint_dir`` (created); return its path.

    The state goes to a temporary file first and is renamed into place, so a crash while
    writing never leaves a truncated state file under the final name.
    """
    path = Path(checkpoint_dir)
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / (CHECKPOINT_STATE + ".tmp")
    with tmp.open("wb") as fh:
        pickle.dump(dict(state), fh, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path / CHECKPOINT_STATE)
    full_meta = {"format": _FORMAT, "version": _VERSION, **meta}
    (path / CHECKPOINT_META).write_text(json.dumps(full_meta, indent=2) + "\n")
    return str(path)


def load_checkpoint(checkpoint_dir: str | Path) -> dict[str, Any]:
    """The pickled state of a checkpoint directory (or of its state file), checked."""
    path = Path(checkpoint_dir)
    if path.is_file():
        path = path.parent
    meta_file, state_file = path / CHECKPOINT_META, path / CHECKPOINT_STATE
    if not meta_file.is_file() or not state_file.is_file():
        raise ConfigError(
            f"{str(path)!r} is not an rlflow checkpoint: it needs {CHECKPOINT_META} and "
            f"{CHECKPOINT_STATE} (written by Trainer.save)"
        )
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"checkpoint {str(path)!r}: bad {CHECKPOINT_META} ({err})") from None
    if meta.get("format") != _FORMAT or meta.get("version") != _VERSION:
        raise ConfigError(
            f"checkpoint {str(path)!r}: format {meta.get('format')!r} version "
            f"{meta.get('version')!r} is not {_FORMAT!r} version {_VERSION}"
        )
    with state_file.open("rb") as fh:
        state: dict[str, Any] = pickle.load(fh)
    return state


def picklable(obj: Any) -> bool:
    """True if ``obj`` pickles (e.g. a custom plan function worth saving)."""
    try:
        pickle.dumps(obj)
    except Exception:  # noqa: BLE001 - any failure means "not picklable"
        return False
    return True

"""`TensorBoardLogger`: TensorBoard event files, one scalar per numeric result key.

Written with tensorboardX (a core dependency: ~100 kB of pure Python over protobuf and numpy,
which Ray already installs) rather than `torch.utils.tensorboard`, which needs the whole
``tensorboard`` package (a web server and its dependencies) just to write the same files.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlflow.loggers.files import flatten

__all__ = ["TensorBoardLogger", "scalars"]

_BAD_TAG_CHARS = re.compile(r"[^-/\w.]")


def scalars(result: Mapping[str, Any]) -> dict[str, float]:
    """The numeric leaves of ``result`` as TensorBoard tags -> floats: nested keys joined with
    ``/``, characters TensorBoard does not allow in a tag replaced by ``_``; None, bools,
    strings and lists are left out.

    >>> scalars({"loss": 1, "stages": {"for_each(Train)#3": {"items": 2}}, "env": "x"})
    {'loss': 1.0, 'stages/for_each_Train__3/items': 2.0}
    """
    return {
        _BAD_TAG_CHARS.sub("_", key): float(value)
        for key, value in flatten(result).items()
        if isinstance(value, numbers.Real) and not isinstance(value, bool)
    }


class TensorBoardLogger:
    """Every numeric result key (returns, per-policy returns ``policy_reward_mean/<id>``,
    learner stats ``info/learner/<policy>/<stat>``, timers, counters, per-stage flow stats
    ``stages/<stage>/<stat>``) as a scalar at step ``iteration``, in ``logdir``'s event files.

    Opened at iteration ``start``, it writes a purge marker at that step, so TensorBoard hides
    the events a crashed run wrote past its checkpoint and the resumed run's steps follow on.
    """

    def __init__(self, logdir: Path, start: int) -> None:
        from tensorboardX import SummaryWriter

        # The start in the file name keeps a resumed run (same second) from reusing a name.
        self._writer = SummaryWriter(
            str(logdir), purge_step=start, flush_secs=10, filename_suffix=f".{start:09d}"
        )

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Add each numeric key of ``result`` (non-finite ones too) and flush."""
        step = int(result["iteration"])
        for tag, value in scalars(result).items():
            self._writer.add_scalar(tag, value, global_step=step)
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()

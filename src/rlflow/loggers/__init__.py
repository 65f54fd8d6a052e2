"""Where a run's results go: the `Logger` protocol, the built-in loggers and `LoggerSet`.

A `rlflow.Trainer` made with ``logdir=DIR`` opens the loggers its config names (``loggers``,
default ``jsonl``, ``csv``, ``tensorboard``) in ``DIR`` at its first result, and hands each
result of `~rlflow.Trainer.train` to them, in order, then to loggers of your own::

    class PrintReturn:
        def on_result(self, result):
            print(result["iteration"], result["episode_return_mean"])

        def close(self):
            pass

    trainer = rlflow.Trainer("ppo", env="CartPole-v1", logdir="runs/ppo")
    trainer.loggers.add(PrintReturn())

Files in ``DIR``: ``progress.jsonl`` (`JsonlLogger`), ``progress.csv`` (`CsvLogger`), TensorBoard
``events.out.tfevents.*`` (`TensorBoardLogger`), ``wandb/`` (`WandbLogger`), ``mlflow.db``
(`MLflowLogger`), and ``plan.json``, the plan's graph (`LoggerSet.write_plan`). A run
restored at iteration N and logging to the same dir follows on: rows of later iterations (lost
by a crash) are dropped and TensorBoard steps continue from N + 1.

``DIR`` may be an object-storage URI (``s3://bucket/run``; `rlflow.storage`): the loggers then
write in a local staging folder (`rlflow.storage.StagedDir`, seeded with the files already
there, so a resumed run appends), which is copied up by `LoggerSet.sync` (`rlflow.Trainer`
calls it at every checkpoint) and when the set closes. No logger ever sees the URI.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rlflow.checks import check_type
from rlflow.config.reporting import LOGGER_NAMES
from rlflow.errors import ConfigError
from rlflow.flow import PlanGraph
from rlflow.loggers.external import MLflowLogger, WandbLogger
from rlflow.loggers.files import (
    CSV_FILE,
    JSONL_FILE,
    CsvLogger,
    JsonlLogger,
    flatten,
    jsonable,
    read_progress,
)
from rlflow.loggers.plan_file import PLAN_FILE, read_plan, write_plan
from rlflow.loggers.tensorboard import TensorBoardLogger
from rlflow.storage import StagedDir, is_remote

__all__ = [
    "CSV_FILE",
    "JSONL_FILE",
    "BUILTIN_LOGGERS",
    "LOGGER_NAMES",
    "CsvLogger",
    "JsonlLogger",
    "Logger",
    "LoggerSet",
    "MLflowLogger",
    "PLAN_FILE",
    "TensorBoardLogger",
    "WandbLogger",
    "flatten",
    "check_installed",
    "jsonable",
    "open_logger",
    "read_plan",
    "read_progress",
    "write_plan",
]


@runtime_checkable
class Logger(Protocol):
    """Receives every training result of a run, in order; closed once when the run stops."""

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Take one `rlflow.Trainer.train` result (do not modify it)."""

    def close(self) -> None:
        """Release files and connections; no result follows."""


BUILTIN_LOGGERS: dict[str, Callable[[Path, int], Logger]] = {
    "jsonl": JsonlLogger,
    "csv": CsvLogger,
    "tensorboard": TensorBoardLogger,
    "wandb": WandbLogger,
    "mlflow": MLflowLogger,
}
"""Name (`LOGGER_NAMES`) -> class, called as ``cls(logdir, start_iteration)``; each imports its
third-party package only then."""

# The package each logger imports and the pip extra that installs it (tensorboardX is core).
_PACKAGES = {
    "tensorboard": ("tensorboardX", "tensorboard"),
    "wandb": ("wandb", "wandb"),
    "mlflow": ("mlflow", "mlflow"),
}


def check_installed(name: str) -> None:
    """ConfigError if built-in logger ``name`` needs a package that is not installed."""
    if name not in _PACKAGES:
        return
    package, extra = _PACKAGES[name]
    if importlib.util.find_spec(package) is None:
        raise ConfigError(
            f'logger {name!r} needs the {package!r} package: pip install "rl-flow[{extra}]", '
            "or drop it from loggers"
        )


def open_logger(name: str, logdir: str | Path, *, start: int = 1) -> Logger:
    """Open built-in logger ``name`` (one of `LOGGER_NAMES`) in ``logdir`` (created if needed)
    for results from iteration ``start`` on; ConfigError for an unknown or uninstalled one."""
    _check_name(name)
    check_installed(name)
    path = Path(logdir)
    path.mkdir(parents=True, exist_ok=True)
    return BUILTIN_LOGGERS[name](path, start)


def _check_name(name: str) -> None:
    if name not in BUILTIN_LOGGERS:
        raise ConfigError(f"logger {name!r}: unknown; valid loggers are {', '.join(LOGGER_NAMES)}")


class LoggerSet:
    """The loggers of one run: built-in ones, opened at the first result, then added ones.

    ``names`` are checked (known, installed) when the set is made, so a `rlflow.Trainer`
    refuses them before any actor starts; the files open at the first result, whose
    ``iteration`` says where a resumed run starts. With ``logdir`` None the built-in loggers
    are not used (there is nowhere to write); added ones still are. A ``logdir`` in object
    storage is staged locally (module doc): `sync` copies the files up.
    """

    STAGING_EXCLUDE = ("checkpoint_*",)
    """Top-level names in a remote ``logdir`` the staging folder does not download."""

    def __init__(self, names: Iterable[str] = (), logdir: str | Path | None = None) -> None:
        self._names = tuple(names) if logdir is not None else ()
        for name in self._names:
            _check_name(name)
            check_installed(name)
        self._staged: StagedDir | None = None
        if logdir is not None and is_remote(logdir):
            self._staged = StagedDir(str(logdir), exclude=self.STAGING_EXCLUDE)
            logdir = self._staged.path
        self.logdir = None if logdir is None else Path(logdir)
        """Where the built-in loggers write (None: they are not used); for a ``logdir`` in
        object storage, the local staging folder."""
        self.location: str | None = None if self._staged is None else self._staged.location
        """The object-storage URI the staging folder is copied to (None: a local logdir)."""
        self._loggers: list[Logger] = []
        self._added: list[Logger] = []
        self._opened = False

    def add(self, logger: Logger) -> Logger:
        """Send every later result to ``logger`` too (after the built-in ones); returns it."""
        check_type(logger, "LoggerSet.add(logger)", Logger, "an object with on_result and close")
        self._added.append(logger)
        return logger

    @property
    def loggers(self) -> list[Logger]:
        """The open built-in loggers, then the added ones, in the order results reach them."""
        return [*self._loggers, *self._added]

    def write_plan(self, graph: PlanGraph, *, algorithm: str = "") -> None:
        """Save the run's plan graph as ``logdir/plan.json`` (`write_plan`); nothing without a
        ``logdir``."""
        if self.logdir is not None:
            write_plan(self.logdir, graph, algorithm=algorithm)

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Hand ``result`` to every logger (opening the built-in ones at the first)."""
        if not self._opened:
            self._opened = True
            start = int(result.get("iteration", 1))
            if self.logdir is not None:
                self._loggers = [open_logger(n, self.logdir, start=start) for n in self._names]
        for logger in self.loggers:
            logger.on_result(result)

    def sync(self) -> int:
        """Copy the files written since the last sync to a remote ``logdir``; return how many
        (0 for a local one)."""
        return 0 if self._staged is None else self._staged.sync()

    def close(self) -> None:
        """Close every logger, in order (all of them, even if one raises; then it is raised);
        then copy a remote ``logdir``'s last files up."""
        loggers, self._loggers, self._added = self.loggers, [], []
        with contextlib.ExitStack() as stack:
            if self._staged is not None:
                stack.callback(self._staged.close)  # runs last: after every logger closed
            for logger in reversed(loggers):  # the stack unwinds last-in first
                stack.callback(logger.close)

"""`LoggingConfig`: where a run's results go — the ``loggers`` field every algorithm config
inherits.

Kept apart from `rlflow.config.AlgorithmConfig` (which extends it); the writers themselves are
in `rlflow.loggers`, which a `rlflow.Trainer` with a ``logdir`` opens there.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config.resources import ResourceConfig
from rlflow.errors import ConfigError

__all__ = ["DEFAULT_LOGGERS", "LOGGER_NAMES", "LoggingConfig"]

LOGGER_NAMES = ("jsonl", "csv", "tensorboard", "wandb", "mlflow")
"""The built-in loggers (`rlflow.loggers`): ``progress.jsonl``, ``progress.csv``, TensorBoard
event files, and the optional Weights & Biases and MLflow runs."""

DEFAULT_LOGGERS = ("jsonl", "csv", "tensorboard")
"""The loggers of a run that names none."""


@dataclass(frozen=True, kw_only=True)
class LoggingConfig(ResourceConfig):
    """The result sinks of a run (the resource and failure fields come from its bases)."""

    loggers: tuple[str, ...] = DEFAULT_LOGGERS
    """Built-in loggers a `rlflow.Trainer` with a ``logdir`` writes each result to, in order:
    any of ``jsonl``, ``csv``, ``tensorboard``, ``wandb`` (offline unless ``WANDB_MODE`` says
    otherwise), ``mlflow`` (a local file store unless ``MLFLOW_TRACKING_URI`` is set); a list,
    or one comma-separated string (``"csv,tensorboard"``). Empty: none. Without a ``logdir``
    nothing is written. Loggers of your own: ``trainer.loggers.add(logger)``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        label = f"{type(self).__name__}.loggers"
        names = self.loggers
        if isinstance(names, str):
            names = tuple(part.strip() for part in names.split(",") if part.strip())
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise ConfigError(
                f"{label}={self.loggers!r} must be a list of logger names (or a comma-separated "
                f"string), each one of {list(LOGGER_NAMES)}"
            )
        for name in names:
            if name not in LOGGER_NAMES:
                raise ConfigError(
                    f"{label}={self.loggers!r}: unknown logger {name!r}; valid loggers are "
                    f"{', '.join(LOGGER_NAMES)}"
                )
        if len(set(names)) != len(names):
            raise ConfigError(f"{label}={self.loggers!r}: a logger is named twice")
        object.__setattr__(self, "loggers", tuple(names))

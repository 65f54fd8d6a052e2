"""`ReportingConfig`: the field group of what a run reports: where results go (``loggers``), how
long an iteration is, how episode means are smoothed, and periodic evaluation.

One of the groups `rlflow.config.AlgorithmConfig` is built from. The writers themselves are in
`rlflow.loggers`, which a `rlflow.Trainer` with a ``logdir`` opens there; the evaluation runs in
`rlflow.Trainer.train`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.checks import check_int
from rlflow.config.group import FieldGroup
from rlflow.errors import ConfigError

__all__ = ["DEFAULT_LOGGERS", "LOGGER_NAMES", "ReportingConfig"]

LOGGER_NAMES = ("jsonl", "csv", "tensorboard", "wandb", "mlflow")
"""The built-in loggers (`rlflow.loggers`): ``progress.jsonl``, ``progress.csv``, TensorBoard
event files, and the optional Weights & Biases and MLflow runs."""

DEFAULT_LOGGERS = ("jsonl", "csv", "tensorboard")
"""The loggers of a run that names none."""


@dataclass(frozen=True, kw_only=True)
class ReportingConfig(FieldGroup):
    """Result sinks, iteration length, episode-mean smoothing and periodic evaluation."""

    loggers: tuple[str, ...] = DEFAULT_LOGGERS
    """Built-in loggers a `rlflow.Trainer` with a ``logdir`` writes each result to, in order:
    any of ``jsonl``, ``csv``, ``tensorboard``, ``wandb`` (offline unless ``WANDB_MODE`` says
    otherwise), ``mlflow`` (a local file store unless ``MLFLOW_TRACKING_URI`` is set); a list,
    or one comma-separated string (``"csv,tensorboard"``). Empty: none. Without a ``logdir``
    nothing is written. Loggers of your own: ``trainer.loggers.add(logger)``."""
    min_time_s_per_iteration: float = 0.0
    """An iteration (one ``train()`` result: a progress line, a row of each logger) lasts at
    least this long, in seconds, >= 0 (RLlib's name). An iteration ends at the first train
    item at which both this and ``min_steps_per_iteration`` are met; both 0: one result per
    train item. 0 here, so PG, PPO and MAML report once per train batch (their unit of work);
    the algorithms whose train item is small set 1.0, so they report at most about once a
    second: A2C, A3C, DQN, Ape-X, IMPALA, APPO, SAC, TD3 and ppo_dqn."""
    min_steps_per_iteration: int = 0
    """An iteration samples at least this many env steps, >= 0 (RLlib's
    ``min_sample_timesteps_per_iteration``, formerly ``timesteps_per_iteration``). 0 here;
    RLlib's defaults where it sets one: DQN and Ape-X 1000, SAC and TD3 100."""
    metrics_num_episodes_for_smoothing: int = 100
    """Episode return/length means are over at most this many recent episodes, >= 1."""
    evaluation_interval: int = 0
    """Evaluate every this many training iterations, >= 0 (0: never): greedy episodes on a
    fresh env of the learner (`rlflow.Trainer.evaluate`), reported in that iteration's result
    under ``evaluation/`` keys (``evaluation/episode_return_mean``, ...)."""
    evaluation_num_episodes: int = 10
    """Episodes per periodic evaluation, >= 1."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_loggers()
        self._check_range("min_time_s_per_iteration", 0.0, float("inf"))
        self._check_int("min_steps_per_iteration", 0)
        self._check_int("metrics_num_episodes_for_smoothing", 1)
        name = type(self).__name__
        check_int(self.evaluation_interval, f"{name}.evaluation_interval", low=0)
        check_int(self.evaluation_num_episodes, f"{name}.evaluation_num_episodes", low=1)

    def _check_loggers(self) -> None:
        """Check ``loggers`` and store it as a tuple of names (a string is split at commas)."""
        label = self._label("loggers")
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

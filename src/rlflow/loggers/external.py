"""The optional loggers: Weights & Biases (``pip install "rl-flow[wandb]"``) and MLflow
(``pip install "rl-flow[mlflow]"``). Each logs the numeric keys `scalars` picks, at step
``iteration``; neither needs a network by default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlflow.loggers.tensorboard import scalars

__all__ = ["MLflowLogger", "WandbLogger"]


class WandbLogger:
    """A Weights & Biases run in ``logdir/wandb``, named after the run dir, project ``rlflow``.

    Mode: ``WANDB_MODE`` if set (``online`` to sync as it trains), else ``offline`` (files only,
    no network; upload later with ``wandb sync``). A resumed run starts a new W&B run whose
    steps follow on from ``start``.
    """

    def __init__(self, logdir: Path, start: int) -> None:
        import wandb

        mode: Any = os.environ.get("WANDB_MODE", "offline")  # wandb checks the value
        self._run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "rlflow"),
            name=logdir.resolve().name,
            dir=str(logdir),
            mode=mode,
            config={"start_iteration": start},
        )

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Log ``result``'s numeric keys at step ``iteration``."""
        self._run.log(scalars(result), step=int(result["iteration"]))

    def close(self) -> None:
        """Finish the W&B run."""
        self._run.finish()


class MLflowLogger:
    """An MLflow run, named after the run dir, in ``MLFLOW_TRACKING_URI`` if set, else in a local
    SQLite store ``logdir/mlflow.db`` (no server; browse with
    ``mlflow ui --backend-store-uri sqlite:///RUN_DIR/mlflow.db``)."""

    def __init__(self, logdir: Path, start: int) -> None:
        import mlflow

        if "MLFLOW_TRACKING_URI" not in os.environ:
            mlflow.set_tracking_uri(f"sqlite:///{(logdir / 'mlflow.db').resolve()}")
        self._mlflow = mlflow
        self._run = mlflow.start_run(run_name=logdir.resolve().name)
        mlflow.log_param("start_iteration", start)

    def on_result(self, result: Mapping[str, Any]) -> None:
        """Log ``result``'s numeric keys at step ``iteration``."""
        self._mlflow.log_metrics(scalars(result), step=int(result["iteration"]))

    def close(self) -> None:
        """End the MLflow run."""
        self._mlflow.end_run()

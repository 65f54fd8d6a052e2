"""What ES and ARS share: perturbations of flat parameters, evaluated on the rollout workers.

Both algorithms search in the space of a policy's flat parameters ``theta``: each worker is
sent integer indices into the shared noise table (`rlflow.data.noise`) and the current
``theta`` (stored once per iteration), plays one episode with ``theta + sigma * eps`` and one
with ``theta - sigma * eps`` for each index, and returns only (index, returns, lengths); the
driver turns the returns into an update (ES: centered ranks and Adam; ARS: the top directions
scaled by the returns' std).

- config: :class:`PerturbationConfig` (the noise and evaluation settings both read);
- policy: :class:`FlatPolicy` (a small MLP, or a linear map, acting deterministically, whose
  parameters travel as one float32 vector), its torch model :class:`FlatMLP`; the numpy side
  (``flat.py``, no torch): :func:`batched_forward`, :class:`Adam`;
- the workers' side (``worker.py``, no torch): :func:`evaluate_perturbations` (what runs on a
  worker, given a :class:`PerturbationRequest`, answering a :class:`PerturbationResult`);
- the driver's side (``evaluate.py``): :func:`make_noise_table`, :func:`perturbation_evaluations`
  (the source: one `EvaluationRound` per iteration), :class:`RecordEvaluations` (counters and
  the unperturbed episodes as the run's episodes), :func:`centered_ranks`, :func:`apply_theta`
  (the end of every update).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.perturbation.config import PerturbationConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.perturbation.evaluate import (
        EvaluatePerturbations,
        EvaluationRound,
        RecordEvaluations,
        apply_theta,
        centered_ranks,
        make_noise_table,
        perturbation_evaluations,
    )
    from rlflow.algorithms.perturbation.flat import Adam, batched_forward
    from rlflow.algorithms.perturbation.policy import FlatMLP, FlatPolicy
    from rlflow.algorithms.perturbation.worker import (
        PerturbationRequest,
        PerturbationResult,
        evaluate_perturbations,
        play_episodes,
    )

__all__ = [
    "Adam",
    "EvaluatePerturbations",
    "EvaluationRound",
    "FlatMLP",
    "FlatPolicy",
    "PerturbationConfig",
    "PerturbationRequest",
    "PerturbationResult",
    "RecordEvaluations",
    "apply_theta",
    "batched_forward",
    "centered_ranks",
    "evaluate_perturbations",
    "make_noise_table",
    "perturbation_evaluations",
    "play_episodes",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "EvaluatePerturbations": "evaluate",
        "EvaluationRound": "evaluate",
        "RecordEvaluations": "evaluate",
        "apply_theta": "evaluate",
        "centered_ranks": "evaluate",
        "make_noise_table": "evaluate",
        "perturbation_evaluations": "evaluate",
        "Adam": "flat",
        "batched_forward": "flat",
        "FlatMLP": "policy",
        "FlatPolicy": "policy",
        "PerturbationRequest": "worker",
        "PerturbationResult": "worker",
        "evaluate_perturbations": "worker",
        "play_episodes": "worker",
    },
)

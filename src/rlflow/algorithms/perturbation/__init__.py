"""What ES and ARS share: perturbations of flat parameters, evaluated on the rollout workers.

Both algorithms search in the space of a policy's flat parameters ``theta``: each worker is
sent integer indices into the shared noise table (`rlflow.ops.noise`) and the current
``theta`` (stored once per iteration), plays one episode with ``theta + sigma * eps`` and one
with ``theta - sigma * eps`` for each index, and returns only (index, returns, lengths); the
driver turns the returns into an update (ES: centered ranks and Adam; ARS: the top directions
scaled by the returns' std).

- config: :class:`PerturbationConfig` (the noise and evaluation settings both read);
- policy: :class:`FlatPolicy` (a small MLP, or a linear map, acting deterministically, whose
  parameters travel as one float32 vector), :class:`FlatMLP`, :func:`batched_forward`;
- the dataflow: :func:`perturbation_evaluations` (the source: one `EvaluationRound` per
  iteration), :func:`evaluate_perturbations` (what runs on a worker), :class:`RecordEvaluations`
  (counters and the unperturbed episodes as the run's episodes), :func:`centered_ranks`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.perturbation.config import PerturbationConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.perturbation.evaluate import (
        EvaluationRound,
        PerturbationRequest,
        PerturbationResult,
        RecordEvaluations,
        centered_ranks,
        evaluate_perturbations,
        make_noise_table,
        perturbation_evaluations,
    )
    from rlflow.algorithms.perturbation.policy import (
        FlatMLP,
        FlatPolicy,
        batched_forward,
    )

__all__ = [
    "EvaluationRound",
    "FlatMLP",
    "FlatPolicy",
    "PerturbationConfig",
    "PerturbationRequest",
    "PerturbationResult",
    "RecordEvaluations",
    "batched_forward",
    "centered_ranks",
    "evaluate_perturbations",
    "make_noise_table",
    "perturbation_evaluations",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "EvaluationRound": "evaluate",
        "PerturbationRequest": "evaluate",
        "PerturbationResult": "evaluate",
        "RecordEvaluations": "evaluate",
        "centered_ranks": "evaluate",
        "evaluate_perturbations": "evaluate",
        "make_noise_table": "evaluate",
        "perturbation_evaluations": "evaluate",
        "FlatMLP": "policy",
        "FlatPolicy": "policy",
        "batched_forward": "policy",
    },
)

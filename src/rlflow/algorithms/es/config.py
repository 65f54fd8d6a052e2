"""`ESConfig`: evolution strategies settings (RLlib's ``ES`` names).

Groups: `rlflow.algorithms.perturbation.PerturbationConfig` (`AlgorithmConfig`'s groups plus
the noise table and the evaluation settings). ES's own fields are the iteration's size and
the update's: Adam's ``stepsize`` and the L2 coefficient. Defaults: RLlib's where they fit a
2-core machine, set in the class statement below.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.perturbation.config import PerturbationConfig

__all__ = ["ESConfig"]


@dataclass(frozen=True, kw_only=True)
class ESConfig(PerturbationConfig, defaults={"train_batch_size": 10_000}):
    """Evolution strategies (Salimans et al. 2017): antithetic perturbations, centered ranks,
    Adam on the flat parameters.

    An iteration evaluates at least ``episodes_per_batch`` perturbed episodes (in antithetic
    pairs) and ``train_batch_size`` env steps (perturbed and unperturbed episodes alike), then
    makes one update. ``lr`` is not used (``stepsize`` is Adam's step).
    """

    episodes_per_batch: int = 1000
    """Perturbed episodes per iteration at least, >= 2 (rounded up to pairs)."""
    stepsize: float = 0.01
    """Adam's step size, > 0."""
    l2_coeff: float = 0.005
    """Weight decay: ``l2_coeff * theta`` is added to the (negated) gradient estimate, >= 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("episodes_per_batch", 2)
        self._check_positive("stepsize")
        self._check_range("l2_coeff", 0.0, float("inf"))

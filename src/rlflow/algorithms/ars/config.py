"""`ARSConfig`: augmented random search settings (RLlib's ``ARS`` names).

Groups: `rlflow.algorithms.perturbation.PerturbationConfig` (`AlgorithmConfig`'s groups plus
the noise table and the evaluation settings). ARS's own fields are the directions per
iteration, how many of them the update uses, and its step size. Defaults: a linear policy
(``model.hidden=[]``, started at zero) on normalized observations (``MeanStdFilter``): ARS V2-t.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.perturbation.config import PerturbationConfig
from rlflow.config.model import ModelConfig

__all__ = ["ARSConfig"]


@dataclass(frozen=True, kw_only=True)
class ARSConfig(PerturbationConfig, defaults={"model": ModelConfig(hidden=())}):
    """Augmented random search (Mania et al. 2018), V2-t: each iteration evaluates
    ``num_rollouts`` directions ``delta`` (an episode with ``theta + noise_stdev * delta`` and
    one with ``theta - noise_stdev * delta``), keeps the ``rollouts_used`` whose better return
    is highest and steps ``theta += sgd_stepsize / (b * sigma_R) * sum (r+ - r-) delta``
    (``sigma_R``: the std of the ``2b`` returns used). ``lr`` and ``train_batch_size`` are not
    used. Set ``observation_filter="NoFilter"`` for V1 (no state normalization) and
    ``rollouts_used = num_rollouts`` for V2 (all directions).
    """

    num_rollouts: int = 32
    """Directions per iteration (the paper's N), >= 1."""
    rollouts_used: int = 32
    """Directions the update uses (the paper's b, top by ``max(r+, r-)``), in [1,
    ``num_rollouts``]."""
    sgd_stepsize: float = 0.01
    """The step size (the paper's alpha), > 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("num_rollouts", 1)
        self._check_int("rollouts_used", 1)
        self._check_le("rollouts_used", "num_rollouts")
        self._check_positive("sgd_stepsize")

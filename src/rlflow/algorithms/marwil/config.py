"""`MARWILConfig`: monotonic advantage re-weighted imitation learning from recorded experience.

Groups: `AlgorithmConfig`'s (``input`` names the recorded files), `rlflow.config.learning`'s
`LossWeightsConfig` (the value loss's weight) and `SGDConfig` (epochs and minibatches over each
train batch). Defaults: RLlib's MARWIL where they fit (``beta`` 1, ``train_batch_size`` 2000,
the squared-advantage norm starting at 100); ``lr`` 1e-3 in minibatches of 256 rows (RLlib's
1e-4 on whole batches of 2000 rows moved BC's loss on CartPole data from 0.692 to 0.668 in 150k
rows; this reaches a return of 500 within 70k rows); no rollout workers (the env is stepped
only by evaluation, every iteration); an iteration of at least 10,000 rows read.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config import AlgorithmConfig
from rlflow.config.learning import LossWeightsConfig, SGDConfig

__all__ = ["MARWILConfig"]


@dataclass(frozen=True, kw_only=True)
class MARWILConfig(
    AlgorithmConfig,
    LossWeightsConfig,
    SGDConfig,
    defaults={
        "train_batch_size": 2000,
        "sgd_minibatch_size": 256,
        "lr": 1e-3,
        "num_workers": 0,
        "vf_loss_coeff": 1.0,
        "min_steps_per_iteration": 10_000,
        "evaluation_interval": 1,
    },
):
    """MARWIL (Wang et al., "Exponentially Weighted Imitation Learning for Batched Historical
    Data", NeurIPS 2018): behaviour cloning whose rows are weighted by ``exp(beta * A /
    c)``, ``A`` the return minus the learned value, ``c`` the running root mean square of
    ``A``. ``beta`` 0 is behaviour cloning (the ``bc`` algorithm).

    ``train_batch_size`` rows read make one train batch (``num_sgd_iter`` epochs of
    ``sgd_minibatch_size``-row minibatches, 0: the whole batch at once).
    """

    beta: float = 1.0
    """How strongly advantages weight the imitation, >= 0; 0: plain behaviour cloning (no
    critic is trained: the value loss is left out)."""
    moving_average_sqd_adv_norm_start: float = 100.0
    """The starting value of the running mean of squared advantages, > 0 (RLlib's name)."""
    moving_average_sqd_adv_norm_update_rate: float = 1e-8
    """How fast that running mean follows each train batch's mean squared advantage, in
    (0, 1] (RLlib's name and default: it barely moves, so ``c`` stays near 10)."""
    max_advantage_weight: float = 20.0
    """Each row's weight ``exp(beta * A / c)`` is clipped to at most this, > 0 (as AWR and CRR
    do), so a few rows with large advantages cannot dominate a batch."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_range("beta", 0.0, float("inf"))
        self._check_positive("moving_average_sqd_adv_norm_start")
        self._check_range("moving_average_sqd_adv_norm_update_rate", 0.0, 1.0)
        self._check_positive("moving_average_sqd_adv_norm_update_rate")
        self._check_positive("max_advantage_weight")
        self._check_le("sgd_minibatch_size", "train_batch_size")
        if self.observation_filter != "NoFilter":
            raise self._bad(
                "observation_filter",
                "must be 'NoFilter': recorded observations are as the recording run's policy "
                "saw them (filtered, if that run had a filter)",
            )

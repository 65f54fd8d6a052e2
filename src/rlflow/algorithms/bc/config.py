"""`BCConfig`: behaviour cloning from recorded experience.

MARWIL's config (`rlflow.algorithms.marwil.MARWILConfig`) with ``beta`` 0 (every row weighs the
same) and no value loss, RLlib's BC defaults otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.marwil.config import MARWILConfig

__all__ = ["BCConfig"]


@dataclass(frozen=True, kw_only=True)
class BCConfig(MARWILConfig, defaults={"beta": 0.0, "vf_loss_coeff": 0.0}):
    """Behaviour cloning: maximise ``log pi(a|s)`` of the recorded actions.

    ``input`` names the recorded files; ``train_batch_size`` rows read make one train batch.
    A ``beta`` above 0 makes it MARWIL (use the ``marwil`` algorithm, which also computes the
    returns its advantages need).
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.beta != 0.0:
            raise self._bad("beta", "must be 0 for bc (advantage weights: use marwil)")

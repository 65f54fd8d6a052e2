"""`SACConfig`: soft actor-critic settings (RLlib's names and, mostly, defaults).

`rlflow.algorithms.twin_q.config.TwinQConfig`'s fields (and groups: the replay ones included)
plus SAC's own, the entropy temperature's. Defaults: TwinQ's (SAC changes none).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.twin_q.config import TwinQConfig

__all__ = ["SACConfig"]


@dataclass(frozen=True, kw_only=True)
class SACConfig(TwinQConfig):
    """SAC: tanh-Gaussian actor, twin Q critics, automatic entropy tuning.

    Units: "steps" are env steps sampled.
    """

    initial_alpha: float = 1.0
    """Entropy temperature alpha at the start, > 0."""
    target_entropy: float | str = "auto"
    """Entropy (nats) alpha tuning drives the policy towards; ``"auto"``: minus the number of
    action dimensions (Haarnoja et al.'s heuristic)."""
    alpha_lr: float = 3e-4
    """Learning rate of ``log_alpha`` (Adam), >= 0 (RLlib's ``entropy_learning_rate``; 0 keeps
    alpha at ``initial_alpha``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_positive("initial_alpha")
        self._check_range("alpha_lr", 0.0, float("inf"))
        if isinstance(self.target_entropy, str):
            if self.target_entropy != "auto":
                raise self._bad("target_entropy", "must be a number or 'auto'")
        else:
            self._check_range("target_entropy", float("-inf"), float("inf"))

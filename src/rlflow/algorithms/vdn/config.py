"""`VDNConfig`: QMIX's settings with VDN's mixer (the sum of the agents' Q-values)."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.qmix.config import QMIXConfig

__all__ = ["VDNConfig"]


@dataclass(frozen=True, kw_only=True)
class VDNConfig(QMIXConfig, defaults={"mixer": "vdn"}):
    """VDN (Sunehag et al., AAMAS 2018): QMIX's training with ``Q_tot = sum_a Q_a``.

    ``mixer`` may still be set (``qmix``, ``none``): the algorithm is then QMIX's or
    independent Q-learning under this name.
    """

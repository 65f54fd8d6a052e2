"""rlflow: distributed reinforcement learning written as dataflow.

The parallel iterator library lives in :mod:`rlflow.flow`; errors in :mod:`rlflow.errors`.
:class:`rlflow.Trainer` (in :mod:`rlflow.trainer`) drives an algorithm's plan; it is imported on
first use so that ``import rlflow`` stays light (no torch, no Ray).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlflow.trainer import Trainer

__version__ = "0.1.0"

__all__ = ["Trainer", "__version__"]


def __getattr__(name: str) -> Any:
    """Import ``rlflow.Trainer`` lazily, on first access."""
    if name == "Trainer":
        from rlflow.trainer import Trainer

        return Trainer
    raise AttributeError(f"module 'rlflow' has no attribute {name!r}")

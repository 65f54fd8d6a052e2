"""rlflow: distributed reinforcement learning written as dataflow.

The parallel iterator library lives in :mod:`rlflow.flow`; errors in :mod:`rlflow.errors`.
:class:`rlflow.Trainer` (in :mod:`rlflow.trainer`) drives an algorithm's plan; it is imported on
first use so that ``import rlflow`` stays light (no torch, no Ray); so is
:func:`rlflow.load_policy` (`rlflow.export.load_policy`: an exported policy, without Ray).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlflow.export import load_policy
    from rlflow.trainer import Trainer

from rlflow.version import __version__

__all__ = ["Trainer", "__version__", "load_policy"]


def __getattr__(name: str) -> Any:
    """Import ``rlflow.Trainer`` and ``rlflow.load_policy`` lazily, on first access."""
    if name == "Trainer":
        from rlflow.trainer import Trainer

        return Trainer
    if name == "load_policy":
        from rlflow.export import load_policy

        return load_policy
    raise AttributeError(f"module 'rlflow' has no attribute {name!r}")

"""Compatibility path of `PGPolicy`, which lives in `rlflow.algorithms.pg.policy`."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the layer above: imported lazily at run time, by __getattr__
    from rlflow.algorithms.pg.policy import PGPolicy

__all__ = ["PGPolicy"]


def __getattr__(name: str) -> Any:
    """Load ``PGPolicy`` from its algorithm's package on first use (PEP 562)."""
    if name in __all__:
        from rlflow.algorithms.pg import policy

        return getattr(policy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

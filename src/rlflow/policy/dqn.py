"""Compatibility path of `DQNPolicy` and its helpers, which live in
`rlflow.algorithms.dqn.policy`."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the layer above: imported lazily at run time, by __getattr__
    from rlflow.algorithms.dqn.policy import (
        BATCH_INDEXES,
        DISCOUNTS,
        TD_ERROR,
        WEIGHTS,
        DQNPolicy,
        QNetwork,
        huber,
    )

__all__ = ["BATCH_INDEXES", "DISCOUNTS", "TD_ERROR", "WEIGHTS", "DQNPolicy", "QNetwork", "huber"]


def __getattr__(name: str) -> Any:
    """Load the names from DQN's package on first use (PEP 562)."""
    if name in __all__:
        from rlflow.algorithms.dqn import policy

        return getattr(policy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

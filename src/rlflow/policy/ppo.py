"""Compatibility path of `PPOPolicy`, which lives in `rlflow.algorithms.ppo.policy`."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the layer above: imported lazily at run time, by __getattr__
    from rlflow.algorithms.ppo.policy import PPOPolicy

__all__ = ["PPOPolicy"]


def __getattr__(name: str) -> Any:
    """Load ``PPOPolicy`` from its algorithm's package on first use (PEP 562)."""
    if name in __all__:
        from rlflow.algorithms.ppo import policy

        return getattr(policy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

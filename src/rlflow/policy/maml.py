"""Compatibility path of `MAMLPolicy` and its helpers, which live in
`rlflow.algorithms.maml.policy`."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the layer above: imported lazily at run time, by __getattr__
    from rlflow.algorithms.maml.policy import (
        MAMLPolicy,
        episode_returns,
        episode_timesteps,
        linear_feature_baseline,
    )

__all__ = ["MAMLPolicy", "episode_returns", "episode_timesteps", "linear_feature_baseline"]


def __getattr__(name: str) -> Any:
    """Load the names from MAML's package on first use (PEP 562)."""
    if name in __all__:
        from rlflow.algorithms.maml import policy

        return getattr(policy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

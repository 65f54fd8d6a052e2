"""Compatibility path of `VTracePolicy` (`rlflow.algorithms.impala.policy`), `APPOPolicy`
(`rlflow.algorithms.appo.policy`) and `sequence_ends` (`rlflow.policy.vtrace`)."""

from typing import TYPE_CHECKING, Any

from rlflow.policy.vtrace import sequence_ends

if TYPE_CHECKING:  # the layer above: imported lazily at run time, by __getattr__
    from rlflow.algorithms.appo.policy import APPOPolicy
    from rlflow.algorithms.impala.policy import VTracePolicy

__all__ = ["APPOPolicy", "VTracePolicy", "sequence_ends"]

_MOVED = {
    "VTracePolicy": "rlflow.algorithms.impala.policy",
    "APPOPolicy": "rlflow.algorithms.appo.policy",
}


def __getattr__(name: str) -> Any:
    """Load the policies from their algorithms' packages on first use (PEP 562)."""
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Torch policies: the `TorchPolicy` base and the pieces several algorithms share.

Where to start: :class:`TorchPolicy` (acting, gradients, weights and checkpoint state);
a new algorithm subclasses it (or :class:`ActorCriticPolicy`, for GAE postprocessing) in its
own package, ``rlflow.algorithms.<name>.policy``, and writes ``loss``. Shared here:
:func:`adaptive_kl_coeff` (PPO, MAML) and `rlflow.policy.vtrace.VTracePolicyBase` (IMPALA,
APPO).

``PGPolicy`` and ``PPOPolicy`` (and the modules ``pg``, ``ppo``, ``dqn``, ``impala``,
``maml``) are kept importable from here for compatibility: they are loaded from
`rlflow.algorithms` on first use, so this package never imports the layer above it.
"""

from typing import TYPE_CHECKING, Any

from rlflow.policy.policy import POLICY_LAG, ActorCriticPolicy, TorchPolicy, adaptive_kl_coeff

if TYPE_CHECKING:  # the layer above: imported lazily at run time, by __getattr__
    from rlflow.algorithms.pg.policy import PGPolicy
    from rlflow.algorithms.ppo.policy import PPOPolicy

__all__ = [
    "POLICY_LAG",
    "ActorCriticPolicy",
    "PGPolicy",
    "PPOPolicy",
    "TorchPolicy",
    "adaptive_kl_coeff",
]

_MOVED = {
    "PGPolicy": "rlflow.algorithms.pg.policy",
    "PPOPolicy": "rlflow.algorithms.ppo.policy",
}


def __getattr__(name: str) -> Any:
    """The policies that moved to their algorithms' packages (PEP 562, loaded on first use)."""
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

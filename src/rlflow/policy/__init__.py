"""Torch policies: the `TorchPolicy` base and the policies algorithms share.

Where to start: :class:`TorchPolicy` (acting, gradients, weights and checkpoint state);
a new algorithm subclasses it and writes ``loss``. :class:`PGPolicy` is REINFORCE / A2C,
:class:`PPOPolicy` is PPO's clipped objective with the adaptive KL penalty.
"""

from rlflow.policy.pg import PGPolicy
from rlflow.policy.policy import TorchPolicy
from rlflow.policy.ppo import PPOPolicy

__all__ = ["PGPolicy", "PPOPolicy", "TorchPolicy"]

"""`PGPolicy`: vanilla policy gradient (REINFORCE), or A2C's loss when a critic is used.

Williams, "Simple Statistical Gradient-Following Algorithms for Connectionist Reinforcement
Learning" (1992); Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning" (2016).

    loss = -mean(logp(a|s) * A) + vf_loss_coeff * mean((V(s) - V_target)^2)
           - entropy_coeff * mean(H(pi(.|s)))

The value term is present only with ``use_critic``. Without a critic ``A`` is the discounted
return (see :meth:`TorchPolicy.postprocess_trajectory`).

Config keys read here (besides the base ones): ``vf_loss_coeff`` (0.5, >= 0),
``entropy_coeff`` (0.0, >= 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import torch

from rlflow.data.sample_batch import ACTIONS, ADVANTAGES, OBS, VALUE_TARGETS
from rlflow.policy.policy import TorchPolicy

__all__ = ["PGPolicy"]


class PGPolicy(TorchPolicy):
    """Policy-gradient policy; A2C-style loss when ``use_critic`` is on (the default).

    Reads the batch columns `OBS`, `ACTIONS`, `ADVANTAGES` and, with a critic,
    `VALUE_TARGETS`. Stats: ``policy_loss``, ``vf_loss`` (0 without a critic), ``entropy``.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: Mapping[str, Any],
        *,
        seed: int | None = None,
    ) -> None:
        """Build as :class:`TorchPolicy` does and read the loss coefficients."""
        super().__init__(observation_space, action_space, config, seed=seed)
        self.vf_loss_coeff = self._number("vf_loss_coeff", 0.5, low=0.0)
        self.entropy_coeff = self._number("entropy_coeff", 0.0, low=0.0)

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        """Return the policy-gradient loss on a batch and its parts as stats."""
        dist_inputs, values = self.model(batch_tensors[OBS])
        dist = self.dist_class(dist_inputs)
        logp = dist.logp(batch_tensors[ACTIONS])
        policy_loss = -(logp * batch_tensors[ADVANTAGES]).mean()
        entropy = dist.entropy().mean()
        total = policy_loss - self.entropy_coeff * entropy
        vf_loss = torch.zeros(())
        if self.use_critic:
            vf_loss = (values - batch_tensors[VALUE_TARGETS]).pow(2).mean()
            total = total + self.vf_loss_coeff * vf_loss
        stats = {
            "policy_loss": float(policy_loss.detach()),
            "vf_loss": float(vf_loss.detach()),
            "entropy": float(entropy.detach()),
        }
        return total, stats

"""`MARWILPolicy`: advantage-weighted behaviour cloning with a learned value baseline.

Wang et al., "Exponentially Weighted Imitation Learning for Batched Historical Data"
(NeurIPS 2018)::

    A = G - V(s)        (G: the discounted return, column VALUE_TARGETS, `MarwilReturns`)
    c^2 <- c^2 + rate * (mean(A^2) - c^2)
    w = min(exp(beta * A / c), max_advantage_weight)      (no gradient through w)
    loss = -mean(w * logp(a|s)) + vf_loss_coeff * 0.5 * mean(A^2) - entropy_coeff * H

With ``beta`` 0 every weight is 1 and the value term is left out: behaviour cloning
(``-mean(logp(a|s))``), which reads only `OBS` and `ACTIONS`. The ``bc`` algorithm uses this
policy with its config (through the registry).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import torch

from rlflow.algorithms.marwil.config import MARWILConfig
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import ACTIONS, VALUE_TARGETS
from rlflow.policy.entropy_schedule import EntropyCoeffSchedule
from rlflow.policy.policy import TorchPolicy

__all__ = ["MARWILPolicy"]


class MARWILPolicy(EntropyCoeffSchedule, TorchPolicy):
    """Advantage-weighted imitation (behaviour cloning when ``beta`` is 0).

    Stats: ``policy_loss``, ``vf_loss``, ``entropy``, ``mean_weight`` (of the rows' imitation
    weights), ``sqd_adv_norm`` (the running ``c^2``).
    """

    config: MARWILConfig
    config_class: ClassVar[type[AlgorithmConfig]] = MARWILConfig
    supports_custom_model: ClassVar[bool] = True

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: MARWILConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build as :class:`~rlflow.policy.TorchPolicy` does; start the running ``c^2``."""
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        self.sqd_adv_norm = torch.tensor(
            float(config.moving_average_sqd_adv_norm_start), device=self.device
        )
        """The running mean of squared advantages, ``c^2``, on the policy's device
        (checkpointed with the policy)."""

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return the advantage-weighted imitation loss on a batch and its parts as stats."""
        dist_inputs, values = self.model_outputs(batch_tensors)
        dist = self.dist_class(dist_inputs)
        logp = dist.logp(batch_tensors[ACTIONS])
        entropy = dist.entropy().mean()
        zero = torch.zeros((), device=self.device)
        config = self.config
        if config.beta == 0.0:
            policy_loss = -logp.mean()
            vf_loss, mean_weight = zero, zero + 1.0
        else:
            advantages = batch_tensors[VALUE_TARGETS] - values
            detached = advantages.detach()
            self.sqd_adv_norm += config.moving_average_sqd_adv_norm_update_rate * (
                detached.pow(2).mean() - self.sqd_adv_norm
            )
            scale = config.beta / (1e-8 + self.sqd_adv_norm.sqrt())
            weights = torch.exp(detached * scale).clamp(max=config.max_advantage_weight)
            policy_loss = -(weights * logp).mean()
            vf_loss = 0.5 * advantages.pow(2).mean()
            mean_weight = weights.mean()
        total = policy_loss + config.vf_loss_coeff * vf_loss - self.entropy_coeff * entropy
        stats = {
            "policy_loss": policy_loss.detach(),
            "vf_loss": vf_loss.detach(),
            "entropy": entropy.detach(),
            "mean_weight": mean_weight,
            "sqd_adv_norm": self.sqd_adv_norm.clone(),
        }
        return total, stats

    def get_state(self) -> dict[str, Any]:
        """The base's state and the running ``c^2``."""
        return {**super().get_state(), "sqd_adv_norm": float(self.sqd_adv_norm)}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`get_state` gave."""
        super().set_state(state)
        if "sqd_adv_norm" in state:
            self.sqd_adv_norm.fill_(float(state["sqd_adv_norm"]))

"""`PPOPolicy`: the clipped surrogate objective with an optional adaptive KL penalty.

Schulman et al., "Proximal Policy Optimization Algorithms" (2017). With ``r = pi(a|s) /
pi_old(a|s)`` (from the batch's `LOGP`) and ``pi_old`` rebuilt from `ACTION_DIST_INPUTS`:

    policy_loss = -mean(min(r * A, clip(r, 1 - clip_param, 1 + clip_param) * A))
    kl          = mean(KL(pi_old || pi))
    vf_loss     = mean(max((V - V_t)^2, (V_old + clip(V - V_old, -c, c) - V_t)^2))   # c set
                = mean((V - V_t)^2)                                                   # c None
    loss        = policy_loss + kl_coeff * kl + vf_loss_coeff * vf_loss
                  - entropy_coeff * entropy

``V_old`` is `VF_PREDS` and ``c`` is ``vf_clip_param`` (the value clipping of the paper-era
RLlib and CleanRL). The plan calls :meth:`PPOPolicy.update_kl` once per train batch with the
mean sampled KL; the coefficient then adapts as RLlib does
(:func:`rlflow.policy.adaptive_kl_coeff`). Reads `PPOConfig`'s ``clip_param``,
``vf_clip_param``, ``vf_loss_coeff``, ``entropy_coeff``, ``kl_coeff`` (the initial value) and
``kl_target`` besides the shared settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import torch

from rlflow.algorithms.ppo.config import PPOConfig
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    ADVANTAGES,
    LOGP,
    VALUE_TARGETS,
    VF_PREDS,
)
from rlflow.policy.entropy_schedule import EntropyCoeffSchedule
from rlflow.policy.policy import ActorCriticPolicy, adaptive_kl_coeff

__all__ = ["PPOPolicy"]


class PPOPolicy(EntropyCoeffSchedule, ActorCriticPolicy):
    """PPO policy: clipped surrogate, (clipped) value loss, entropy bonus, adaptive KL penalty.

    Reads the batch columns `OBS`, `ACTIONS`, `ADVANTAGES`, `LOGP`, `ACTION_DIST_INPUTS` and,
    with a critic, `VALUE_TARGETS` (and `VF_PREDS` when ``vf_clip_param`` is set). Stats:
    ``policy_loss``, ``vf_loss``, ``entropy``, ``kl``, ``kl_coeff``, ``clip_frac``.
    """

    config: PPOConfig
    config_class: ClassVar[type[AlgorithmConfig]] = PPOConfig

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: PPOConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build as :class:`~rlflow.policy.ActorCriticPolicy` does; start the KL penalty's
        coefficient at ``kl_coeff``."""
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        self.kl_coeff = config.kl_coeff
        """Current KL penalty coefficient; changed by :meth:`update_kl`."""

    def update_kl(self, sampled_kl: float) -> float:
        """Adapt ``kl_coeff`` to the mean KL of the last train batch; return the new value."""
        self.kl_coeff = adaptive_kl_coeff(self.kl_coeff, sampled_kl, self.config.kl_target)
        return self.kl_coeff

    def _vf_loss(self, values: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Squared value error, clipped around `VF_PREDS` when ``vf_clip_param`` is set."""
        targets = batch[VALUE_TARGETS]
        err = (values - targets).pow(2)
        clip = self.config.vf_clip_param
        if clip is not None:
            old = batch[VF_PREDS]
            clipped = old + (values - old).clamp(-clip, clip)
            err = torch.max(err, (clipped - targets).pow(2))
        return err.mean()

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return the PPO loss on a (mini)batch and its parts as stats."""
        dist_inputs, values = self.model_outputs(batch_tensors)
        dist = self.dist_class(dist_inputs)
        old_dist = self.dist_class(batch_tensors[ACTION_DIST_INPUTS])
        ratio = torch.exp(dist.logp(batch_tensors[ACTIONS]) - batch_tensors[LOGP])
        adv = batch_tensors[ADVANTAGES]
        clip_param = self.config.clip_param
        clipped = ratio.clamp(1.0 - clip_param, 1.0 + clip_param)
        policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
        kl = old_dist.kl(dist).mean()
        entropy = dist.entropy().mean()
        total = policy_loss - self.entropy_coeff * entropy
        if self.kl_coeff > 0.0:
            total = total + self.kl_coeff * kl
        vf_loss = torch.zeros((), device=self.device)
        if self.use_critic:
            vf_loss = self._vf_loss(values, batch_tensors)
            total = total + self.config.vf_loss_coeff * vf_loss
        clip_frac = ((ratio - 1.0).abs() > clip_param).float().mean()
        stats = {
            "policy_loss": policy_loss,
            "vf_loss": vf_loss,
            "entropy": entropy,
            "kl": kl,
            "kl_coeff": self.kl_coeff,
            "clip_frac": clip_frac,
        }
        return total, stats

    def get_state(self) -> dict[str, Any]:
        """Return the base snapshot plus the current ``kl_coeff``."""
        return {**super().get_state(), "kl_coeff": self.kl_coeff}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`, ``kl_coeff`` included."""
        super().set_state(state)
        self.kl_coeff = float(state.get("kl_coeff", self.kl_coeff))

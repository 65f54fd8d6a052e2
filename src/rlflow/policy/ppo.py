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
mean sampled KL; the coefficient then adapts as RLlib does: x1.5 when the KL is above
``2 * kl_target``, x0.5 when below ``kl_target / 2``.

Config keys read here (besides the base ones), RLlib's names and defaults: ``clip_param``
(0.2, > 0), ``vf_clip_param`` (None, else > 0), ``vf_loss_coeff`` (1.0, >= 0),
``entropy_coeff`` (0.0, >= 0), ``kl_coeff`` (0.2, >= 0; 0 turns the penalty off),
``kl_target`` (0.01, > 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import torch

from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    ADVANTAGES,
    LOGP,
    OBS,
    VALUE_TARGETS,
    VF_PREDS,
)
from rlflow.policy.policy import TorchPolicy

__all__ = ["PPOPolicy"]


class PPOPolicy(TorchPolicy):
    """PPO policy: clipped surrogate, (clipped) value loss, entropy bonus, adaptive KL penalty.

    Reads the batch columns `OBS`, `ACTIONS`, `ADVANTAGES`, `LOGP`, `ACTION_DIST_INPUTS` and,
    with a critic, `VALUE_TARGETS` (and `VF_PREDS` when ``vf_clip_param`` is set). Stats:
    ``policy_loss``, ``vf_loss``, ``entropy``, ``kl``, ``kl_coeff``, ``clip_frac``.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: Mapping[str, Any],
        *,
        seed: int | None = None,
    ) -> None:
        """Build as :class:`TorchPolicy` does and read the PPO coefficients."""
        super().__init__(observation_space, action_space, config, seed=seed)
        self.clip_param = self._number("clip_param", 0.2, low=0.0, low_open=True)
        vf_clip = self.config.get("vf_clip_param")
        self.vf_clip_param: float | None = (
            None if vf_clip is None else self._number("vf_clip_param", 0.0, low=0.0, low_open=True)
        )
        self.vf_loss_coeff = self._number("vf_loss_coeff", 1.0, low=0.0)
        self.entropy_coeff = self._number("entropy_coeff", 0.0, low=0.0)
        self.kl_coeff = self._number("kl_coeff", 0.2, low=0.0)
        """Current KL penalty coefficient; changed by :meth:`update_kl`."""
        self.kl_target = self._number("kl_target", 0.01, low=0.0, low_open=True)

    def update_kl(self, sampled_kl: float) -> float:
        """Adapt ``kl_coeff`` to the mean KL of the last train batch; return the new value.

        x1.5 if ``sampled_kl > 2 * kl_target``, x0.5 if ``sampled_kl < kl_target / 2``, else
        unchanged. A coefficient of 0 stays 0.
        """
        if sampled_kl > 2.0 * self.kl_target:
            self.kl_coeff *= 1.5
        elif sampled_kl < 0.5 * self.kl_target:
            self.kl_coeff *= 0.5
        return self.kl_coeff

    def _vf_loss(self, values: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Squared value error, clipped around `VF_PREDS` when ``vf_clip_param`` is set."""
        targets = batch[VALUE_TARGETS]
        err = (values - targets).pow(2)
        if self.vf_clip_param is not None:
            old = batch[VF_PREDS]
            clipped = old + (values - old).clamp(-self.vf_clip_param, self.vf_clip_param)
            err = torch.max(err, (clipped - targets).pow(2))
        return err.mean()

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        """Return the PPO loss on a (mini)batch and its parts as stats."""
        dist_inputs, values = self.model(batch_tensors[OBS])
        dist = self.dist_class(dist_inputs)
        old_dist = self.dist_class(batch_tensors[ACTION_DIST_INPUTS])
        ratio = torch.exp(dist.logp(batch_tensors[ACTIONS]) - batch_tensors[LOGP])
        adv = batch_tensors[ADVANTAGES]
        clipped = ratio.clamp(1.0 - self.clip_param, 1.0 + self.clip_param)
        policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
        kl = old_dist.kl(dist).mean()
        entropy = dist.entropy().mean()
        total = policy_loss - self.entropy_coeff * entropy
        if self.kl_coeff > 0.0:
            total = total + self.kl_coeff * kl
        vf_loss = torch.zeros(())
        if self.use_critic:
            vf_loss = self._vf_loss(values, batch_tensors)
            total = total + self.vf_loss_coeff * vf_loss
        clip_frac = ((ratio - 1.0).abs() > self.clip_param).float().mean()
        stats = {
            "policy_loss": float(policy_loss.detach()),
            "vf_loss": float(vf_loss.detach()),
            "entropy": float(entropy.detach()),
            "kl": float(kl.detach()),
            "kl_coeff": self.kl_coeff,
            "clip_frac": float(clip_frac),
        }
        return total, stats

    def get_state(self) -> dict[str, Any]:
        """Return the base snapshot plus the current ``kl_coeff``."""
        return {**super().get_state(), "kl_coeff": self.kl_coeff}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`, ``kl_coeff`` included."""
        super().set_state(state)
        self.kl_coeff = float(state.get("kl_coeff", self.kl_coeff))

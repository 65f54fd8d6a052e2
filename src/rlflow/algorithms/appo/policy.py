"""`APPOPolicy`: asynchronous PPO, a clipped surrogate on V-trace advantages.

RLlib's APPO on IMPALA's dataflow (Espeholt et al. 2018; Schulman et al. 2017). V-trace
targets (:class:`~rlflow.algorithms.actor_learner.VTracePolicyBase`) take the *target network*
as pi, and PPO's clipped surrogate the ratio pi / pi_target (through mu, as RLlib does; the
importance weight mu / pi_target is clipped to [0, 2]). The plan copies the model into the
target network every ``target_network_update_freq`` trained env steps (``update_target``). An
optional KL(mu || pi) penalty is added with ``use_kl_loss``.

Reads `APPOConfig`'s ``clip_param``, ``use_kl_loss``, ``kl_coeff`` and the V-trace settings
``vtrace_clip_rho_threshold``, ``vtrace_clip_pg_rho_threshold``, ``vf_loss_coeff``,
``entropy_coeff`` besides the shared ones.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from rlflow.algorithms.actor_learner.policy import VTracePolicyBase
from rlflow.algorithms.appo.config import APPOConfig
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import ACTION_DIST_INPUTS, ACTIONS, LOGP
from rlflow.policy.entropy_schedule import EntropyCoeffSchedule

__all__ = ["APPOPolicy"]


class APPOPolicy(EntropyCoeffSchedule, VTracePolicyBase):
    """Asynchronous PPO: clipped surrogate on V-trace advantages against a target network.

    Reads the columns of IMPALA's ``VTracePolicy`` and, with ``use_kl_loss``,
    `ACTION_DIST_INPUTS`. Stats: ``policy_loss``, ``vf_loss``, ``entropy``, ``mean_rho``,
    ``mean_vs``, ``kl``, ``clip_frac``.
    """

    config: APPOConfig
    config_class: ClassVar[type[AlgorithmConfig]] = APPOConfig

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: APPOConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build as :class:`~rlflow.policy.TorchPolicy` does and copy the target network."""
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        self.target_model = copy.deepcopy(self.model)
        """The target network pi_target (V-trace's pi and the surrogate's denominator)."""
        self.target_model.requires_grad_(False)

    def update_target(self) -> None:
        """Copy the model's weights into the target network."""
        self.target_model.load_state_dict(self.model.state_dict())

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return the APPO loss on a (mini)batch of sequences and its parts as stats (tensors:
        `TorchPolicy` copies them to the host once per step)."""
        actions = batch_tensors[ACTIONS]
        dist_inputs, values = self.model_outputs(batch_tensors)
        dist = self.dist_class(dist_inputs)
        logp = dist.logp(actions)
        with torch.no_grad():
            target_inputs, _ = self.model_outputs(batch_tensors, self.target_model)
            target_logp = self.dist_class(target_inputs).logp(actions)
        vt = self.compute_vtrace(batch_tensors, target_logp, values)
        behaviour_logp = batch_tensors[LOGP]
        # pi / pi_target, computed through mu as RLlib does, with mu / pi_target clipped.
        is_ratio = torch.exp(behaviour_logp - target_logp).clamp(0.0, 2.0)
        ratio = vt.time_major(is_ratio * torch.exp(logp - behaviour_logp))
        clip_param = self.config.clip_param
        clipped = ratio.clamp(1.0 - clip_param, 1.0 + clip_param)
        adv = vt.pg_advantages
        policy_loss = -vt.mean(torch.min(ratio * adv, clipped * adv))
        vf_loss = 0.5 * vt.mean((vt.time_major(values) - vt.vs).pow(2))
        entropy = vt.mean(vt.time_major(dist.entropy()))
        total = policy_loss + self.config.vf_loss_coeff * vf_loss - self.entropy_coeff * entropy
        kl = torch.zeros((), device=self.device)
        if self.config.use_kl_loss:
            kl = vt.mean(vt.time_major(self.dist_class(batch_tensors[ACTION_DIST_INPUTS]).kl(dist)))
            total = total + self.config.kl_coeff * kl
        stats = {
            "policy_loss": policy_loss,
            "vf_loss": vf_loss,
            "entropy": entropy,
            "mean_rho": vt.mean(vt.rhos),
            "mean_vs": vt.mean(vt.vs),
            "kl": kl,
            "clip_frac": vt.mean(((ratio.detach() - 1.0).abs() > clip_param).float()),
        }
        return total, stats

    def get_state(self) -> dict[str, Any]:
        """Return the base snapshot plus the target network's weights."""
        target = {k: v.cpu().numpy().copy() for k, v in self.target_model.state_dict().items()}
        return {**super().get_state(), "target_weights": target}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`, the target network included."""
        super().set_state(state)
        if "target_weights" in state:
            weights = {k: torch.as_tensor(np.array(v)) for k, v in state["target_weights"].items()}
            self.target_model.load_state_dict(weights)

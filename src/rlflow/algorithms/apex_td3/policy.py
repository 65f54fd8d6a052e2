"""`ApexTD3Policy`: TD3's policy with Ape-X's per-worker noise, its targets moved by the learner.

`rlflow.algorithms.td3.policy.TD3Policy` with two changes for Ape-X's asynchronous dataflow:

- acting: worker ``i``'s Gaussian noise has the fixed std
  `ApexTD3Config.worker_noise_scale` (``exploration_noise`` without
  ``per_worker_exploration``);
- targets: in Ape-X the learner trains in its own thread while the plan's driver runs the
  target step, so TD3's "Polyak after each actor update" is done by the learner itself: each
  loss first moves the targets by every actor update since they last moved (``k`` of them:
  one Polyak step with ``1 - (1 - tau)^k``, ``k`` steps of ``tau`` towards the same online
  weights), before the targets are read. :meth:`ApexTD3Policy.update_target` does nothing.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch

from rlflow.algorithms.apex_td3.config import ApexTD3Config
from rlflow.algorithms.td3.policy import TD3Policy
from rlflow.algorithms.twin_q.policy import polyak_update
from rlflow.config import AlgorithmConfig

__all__ = ["ApexTD3Policy"]


class ApexTD3Policy(TD3Policy):
    """TD3's policy for Ape-X (module docstring): per-worker noise, targets moved in the
    learner's own steps."""

    config: ApexTD3Config
    config_class: ClassVar[type[AlgorithmConfig]] = ApexTD3Config
    algo_name: ClassVar[str] = "Ape-X TD3"

    _targets_at: int | None = None

    def exploration_scale(self) -> float:
        """This worker's noise std: `ApexTD3Config.worker_noise_scale` of its index."""
        return self.config.worker_noise_scale(self.worker_index)

    def actor_updates(self, num_grad_updates: int) -> int:
        """Actor updates among the first ``num_grad_updates`` (the 0th, the ``policy_delay``-th,
        ...)."""
        return math.ceil(num_grad_updates / self.config.policy_delay)

    def catch_up_targets(self) -> int:
        """Polyak-average the targets by the actor updates since they last moved; return how
        many (0 the first time: a new or restored policy starts from its targets as they are)."""
        done = self.update.num_grad_updates
        if self._targets_at is None:
            self._targets_at = done
            return 0
        k = self.actor_updates(done) - self.actor_updates(self._targets_at)
        self._targets_at = done
        if k > 0:
            polyak_update(self.target_model, self.net, 1.0 - (1.0 - self.config.tau) ** k)
        return k

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """TD3's loss, after the targets caught up with the last actor updates."""
        self.catch_up_targets()
        return super().loss(batch_tensors)

    def update_target(self) -> None:
        """Nothing: the learner moves the targets (:meth:`catch_up_targets`) in its own
        thread, where they are read."""

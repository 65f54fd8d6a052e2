"""DD-PPO: decentralized distributed PPO (Wijmans et al. 2020) as a dataflow plan.

Each rollout worker samples *and* learns: the gradients of every minibatch step are all-reduced
among the workers (``torch.distributed``: gloo on CPU, NCCL on CUDA, the machinery of
``num_learners``), so the workers hold equal weights and no batch passes through the driver.
A straggler stops collecting once ``preemption_threshold`` of the workers are done and learns on
the steps it has (the paper's preemption). Policy: PPO's :class:`~rlflow.algorithms.ppo.PPOPolicy`
(given by the registry). Config: :class:`DDPPOConfig`. Plan: :func:`ddppo_plan` (its
operators: `rlflow.algorithms.ddppo.decentralized`).
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.ddppo.config import DDPPOConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.ddppo.plan import ddppo_plan

__all__ = ["DDPPOConfig", "ddppo_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"ddppo_plan": "plan"})

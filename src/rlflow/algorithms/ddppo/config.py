"""`DDPPOConfig`: decentralized distributed PPO settings (RLlib's ``DDPPO`` names and defaults).

`rlflow.algorithms.ppo.config.PPOConfig`'s fields, plus ``keep_local_weights_in_sync`` (RLlib's)
and the straggler preemption of the paper (``preemption_threshold``, the fraction of workers
that must be done before the others stop: Wijmans et al.'s 0.6, ``sync_frac`` in their
habitat-lab code; ``preemption_min_fraction``, the part of a fragment a worker always collects:
their ``SHORT_ROLLOUT_THRESHOLD``, 0.25). RLlib's DDPPO has no preemption.

As in RLlib, each worker's batch is its own ``rollout_fragment_length * num_envs_per_worker``
steps and ``train_batch_size`` must say so; ``sgd_minibatch_size`` is a worker's minibatch
(the effective one is ``num_workers`` times larger); the KL penalty is refused (it would need
a central learner). Unlike RLlib there is no ``torch_distributed_backend``: the workers
all-reduce over gloo on CPU and NCCL on CUDA (``num_gpus_per_worker``), as ``num_learners``
does.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.ppo.config import PPOConfig
from rlflow.checks import check_bool

__all__ = ["DDPPOConfig"]


@dataclass(frozen=True, kw_only=True)
class DDPPOConfig(
    PPOConfig,
    defaults={
        "num_workers": 2,
        "num_envs_per_worker": 5,
        "rollout_fragment_length": 100,
        "train_batch_size": 500,
        "sgd_minibatch_size": 50,
        "num_sgd_iter": 10,
        "kl_coeff": 0.0,
    },
):
    """DD-PPO: every rollout worker samples and learns; gradients are all-reduced among them.

    Refused before any actor starts: ``num_learners`` (the workers are the learners),
    ``num_workers`` 0, ``kl_coeff`` > 0, ``sample_ahead``, and a ``train_batch_size`` that is
    not one worker's batch.
    """

    keep_local_weights_in_sync: bool = True
    """After each round, copy worker 1's weights to the driver's local worker (RLlib's name): a
    little traffic, so that evaluation and export on the driver see the trained policy. False:
    the local worker keeps the weights it started with (checkpoints still hold every worker's
    trained state)."""
    preemption_threshold: float = 0.6
    """Straggler preemption (Wijmans et al. 2020): once this fraction of the workers finished
    their fragments, the others stop collecting and learn on the steps they have. In (0, 1];
    it acts only when ``preemption_threshold * num_workers <= num_workers - 1`` (with 2
    workers, at 0.5 or less); 1.0 turns it off."""
    preemption_min_fraction: float = 0.25
    """A worker is never preempted before its envs took this fraction of
    ``rollout_fragment_length`` steps (at least one step), in (0, 1]."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_learners:
            raise self._bad(
                "num_learners",
                "must be 0: DD-PPO's rollout workers are its learners (each samples, computes "
                "gradients and all-reduces them with the others); set num_workers instead",
            )
        if self.num_workers < 1:
            raise self._bad(
                "num_workers",
                "must be >= 1: DD-PPO learns on its rollout workers, none on the driver",
            )
        if self.elastic():
            raise self._bad(
                "min_workers",
                f"must be None or num_workers={self.num_workers}: DD-PPO's workers learn in one "
                "process group of a fixed size, formed once, so the run cannot grow or shrink",
            )
        if self.kl_coeff > 0.0:
            raise self._bad(
                "kl_coeff",
                "must be 0.0: DD-PPO has no adaptive KL penalty (it would need a central "
                "learner); tune entropy_coeff or clip_param instead",
            )
        check_bool(self.sample_ahead, self._label("sample_ahead"))
        if self.sample_ahead:
            raise self._bad(
                "sample_ahead",
                "must be False: DD-PPO's workers sample and learn in turn, with no central "
                "learner to sample ahead of",
            )
        if self.num_envs_per_worker == "auto":
            raise self._bad(
                "num_envs_per_worker",
                "must be a number for DD-PPO: each worker's batch (rollout_fragment_length * "
                "num_envs_per_worker) must equal train_batch_size",
            )
        per_worker = self.rollout_fragment_length * self.envs_per_worker()
        if self.train_batch_size != per_worker:
            raise self._bad(
                "train_batch_size",
                f"must be one worker's batch, rollout_fragment_length * num_envs_per_worker = "
                f"{self.rollout_fragment_length} * {self.num_envs_per_worker} = {per_worker} "
                "(RLlib's DDPPO; each worker learns on its own batch)",
            )
        check_bool(self.keep_local_weights_in_sync, self._label("keep_local_weights_in_sync"))
        self._check_range("preemption_threshold", 0.0, 1.0)
        if self.preemption_threshold == 0.0:
            raise self._bad("preemption_threshold", "must be in (0, 1] (1.0: no preemption)")
        self._check_range("preemption_min_fraction", 0.0, 1.0)
        if self.preemption_min_fraction == 0.0:
            raise self._bad("preemption_min_fraction", "must be in (0, 1]")

    @property
    def preempts(self) -> bool:
        """Whether a worker can be preempted: the threshold is met without it."""
        return self.preemption_threshold * self.num_workers <= self.num_workers - 1

    @property
    def preemption_min_steps(self) -> int:
        """Steps of each env a worker always takes before it can be preempted (>= 1)."""
        return max(1, int(self.preemption_min_fraction * self.rollout_fragment_length))

"""`ApexTD3Config`: TD3's settings on Ape-X's dataflow, with per-worker exploration noise.

`rlflow.algorithms.td3.config.TD3Config`'s fields (twin critics, ``policy_delay``, the
noises, ``tau``, the replay ones) and `rlflow.algorithms.apex.config.ApexDataflowConfig`'s
(replay shards, weight syncs, requests in flight, the learner queue, ``training_intensity``
held), plus the per-worker noise declared here. As in Ape-X, ``num_workers`` must be >= 1,
``buffer_size`` and ``learning_starts`` count over all shards. New transitions enter a shard
at its highest priority: the workers hold the actor only, not the critics that would give
their TD errors (RLlib's ``APEX_DDPG`` synced the critics too and let the workers compute
them). The targets follow TD3's rule, Polyak-averaged with ``tau`` after each actor update,
so ``target_network_update_freq`` must stay 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.apex.config import ApexDataflowConfig
from rlflow.algorithms.q_learning.config import PerWorkerExplorationConfig
from rlflow.algorithms.td3.config import TD3Config

__all__ = ["ApexTD3Config"]


@dataclass(frozen=True, kw_only=True)
class ApexTD3Config(
    TD3Config,
    ApexDataflowConfig,
    PerWorkerExplorationConfig,
    defaults={
        "num_workers": 2,
        "num_envs_per_worker": 1,
        "rollout_fragment_length": 50,
        "train_batch_size": 256,
        "buffer_size": 1_000_000,
        "learning_starts": 10_000,
        "n_step": 3,
        "prioritized_replay": True,
        "target_network_update_freq": 0,
        "per_worker_exploration": True,
    },
):
    """TD3 with Ape-X's sharded prioritized replay, learner thread and per-worker noise.

    With ``per_worker_exploration`` worker ``i`` = 0..N-1 of ``num_workers`` N acts with
    Gaussian noise of std ``worker_noise ** (1 + worker_noise_alpha * i / (N - 1))`` (in units
    of the Box's half-range; ``worker_noise`` alone when N is 1), Ape-X's per-worker epsilons
    ``0.4 ** (1 + 7 i / (N - 1))`` as RLlib's ``APEX_DDPG`` transposed them to action noise
    (its ``PerWorkerOrnsteinUhlenbeckNoise`` and ``PerWorkerGaussianNoise``); without it every
    worker uses ``exploration_noise``.
    """

    worker_noise: float = 0.4
    """Base of the per-worker noise std, in [0, 1] (the first worker's std)."""
    worker_noise_alpha: float = 7.0
    """Exponent spread of the per-worker noise, >= 0 (0: every worker ``worker_noise``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_range("worker_noise", 0.0, 1.0)
        self._check_range("worker_noise_alpha", 0.0, float("inf"))
        if self.target_network_update_freq != 0:
            raise self._bad(
                "target_network_update_freq",
                "must be 0: the targets are Polyak-averaged with tau after each actor update "
                "(TD3's rule, in the learner thread); set tau and policy_delay instead",
            )

    def worker_noise_scale(self, worker_index: int) -> float:
        """The exploration noise std of rollout worker ``worker_index`` (1..N; 0, the local
        worker: ``exploration_noise``).

        >>> config = ApexTD3Config(num_workers=3, worker_noise=0.5, worker_noise_alpha=2.0)
        >>> [config.worker_noise_scale(i) for i in range(4)]
        [0.1, 0.5, 0.25, 0.125]
        """
        if not self.per_worker_exploration or worker_index < 1:
            return float(self.exploration_noise)
        n = self.num_workers
        frac = (worker_index - 1) / (n - 1) if n > 1 else 0.0
        return float(self.worker_noise ** (1.0 + self.worker_noise_alpha * frac))

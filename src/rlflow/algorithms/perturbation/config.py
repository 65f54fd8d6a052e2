"""`PerturbationConfig`: the settings ES and ARS share (RLlib's names).

An `AlgorithmConfig` (a whole config, not only a group: it is
`rlflow.algorithms.perturbation.FlatPolicy`'s ``config_class``) with the noise table's size
and seed, the perturbations' scale and the share of unperturbed evaluation episodes. Its
checks refuse, before any actor starts: ``num_workers`` 0 (the workers evaluate; the driver
only ranks and updates), learner actors, multi-agent policies, and a noise table larger than
the object store allows (`rlflow.data.noise.noise_memory_limit`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config import AlgorithmConfig
from rlflow.config.model import ModelConfig
from rlflow.data.noise import check_noise_size

__all__ = ["PerturbationConfig"]


@dataclass(frozen=True, kw_only=True)
class PerturbationConfig(
    AlgorithmConfig,
    defaults={
        "observation_filter": "MeanStdFilter",
        "num_workers": 2,
        "model": ModelConfig(hidden=(32,)),
    },
):
    """Evolution-strategy settings: the noise table and how perturbations are evaluated.

    Each iteration the driver draws noise indices, the remote workers play one episode with
    ``theta + noise_stdev * eps`` and one with ``theta - noise_stdev * eps`` per index, and a
    share ``eval_prob`` of unperturbed episodes (the run's reported episodes). Policies act
    deterministically (the mode: argmax of Discrete logits, the mean of Box actions, clipped to
    the bounds). ``rollout_fragment_length`` and ``num_envs_per_worker`` are not used: episodes
    run to their end (the env's time limit).
    """

    noise_stdev: float = 0.02
    """The perturbations' scale sigma (ARS: nu), > 0."""
    noise_size: int = 25_000_000
    """Entries (float32) in the shared noise table, >= 1, at least the policy's parameter
    count; 25M take 100 MB, held once per node in the object store (RLlib's default is 250M,
    1 GB). Larger than the object store allows (Ray's, or 30% of the machine's memory before
    Ray runs) is refused."""
    noise_seed: int = 123
    """Seed of the noise table (RLlib's 123), >= 0: the same seed and size, the same table."""
    eval_prob: float = 0.03
    """Probability, per antithetic pair a worker is sent, of one more episode with the
    unperturbed parameters, in [0, 1]. Those episodes (not updating the observation filter)
    are the run's episodes: ``episode_return_mean`` is over the last
    ``metrics_num_episodes_for_smoothing`` of them."""

    def __post_init__(self) -> None:
        super().__post_init__()
        name = type(self).__name__
        self._check_int("num_workers", 0)
        if self.num_workers < 1:
            raise self._bad(
                "num_workers",
                "must be >= 1: the remote workers evaluate the perturbations; the driver only "
                "ranks their returns and updates theta",
            )
        if self.num_learners:
            raise self._bad(
                "num_learners", "must be 0: the workers evaluate and the driver updates theta"
            )
        if self.policies:
            raise self._bad("policies", f"must be empty: {name} trains one single-agent policy")
        self._check_positive("noise_stdev")
        self._check_int("noise_size", 1)
        self._check_int("noise_seed", 0)
        self._check_range("eval_prob", 0.0, 1.0)
        check_noise_size(self.noise_size, f"{name}.noise_size")

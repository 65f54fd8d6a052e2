"""`DreamerV3Config`: the world model's, the imagination's and the replay's settings.

Names follow RLlib's ``DreamerV3Config`` where the meaning is the same (``model_size``,
``gae_lambda``, ``entropy_scale``, ``world_model_lr``, ``actor_lr``, ``critic_lr``,
``return_normalization_decay``) and the authors' code elsewhere (``train_ratio``: replayed steps
per env step; ``batch_size``, ``batch_length``, ``imagination_horizon``: RLlib's
``batch_size_B``, ``batch_length_T``, ``horizon_H``, which break rlflow's field naming). Defaults
are the paper's (Hafner et al. 2023, table of hyperparameters) but ``gamma`` (0.99 here, 0.997
there) and the replay ratio, scaled to a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from rlflow.checks import check_choice
from rlflow.config import AlgorithmConfig
from rlflow.config.learning import (
    ActorLearningRateConfig,
    ReplayCapacityConfig,
    ReplayStartConfig,
)
from rlflow.config.model import ModelConfig

__all__ = ["MODEL_SIZES", "DreamerV3Config", "ModelSize"]


class ModelSize(NamedTuple):
    """One row of the paper's table of model sizes."""

    gru_units: int
    """Units of the RSSM's deterministic (GRU) state."""
    dense_units: int
    """Units of every MLP layer (encoder, decoder, heads, actor, critic)."""
    num_layers: int
    """Layers of every MLP."""
    cnn_depth: int
    """Channels of the first CNN stage (doubled at each later stage)."""
    num_latents: int = 32
    """Categorical latent variables of the stochastic state."""
    num_classes: int = 32
    """Classes of each."""


MODEL_SIZES: dict[str, ModelSize] = {
    "XS": ModelSize(256, 256, 1, 24),
    "S": ModelSize(512, 512, 2, 32),
    "M": ModelSize(1024, 640, 3, 48),
    "L": ModelSize(2048, 768, 4, 64),
    "XL": ModelSize(4096, 1024, 5, 96),
}
"""The paper's model sizes (Hafner et al. 2023, appendix, "model sizes"): GRU units, dense
units, MLP layers, CNN multiplier; 32 latents of 32 classes at every size."""

MAX_TRAIN_RATIO = 65_536
"""The largest ``train_ratio`` accepted (the paper's largest is 1024 replayed steps per env
step; 64 times that is a typo, not a setting)."""


@dataclass(frozen=True, kw_only=True)
class DreamerV3Config(
    AlgorithmConfig,
    ActorLearningRateConfig,
    ReplayStartConfig,
    ReplayCapacityConfig,
    defaults={
        "actor_lr": 3e-5,
        "replay_capacity": 1_000_000,
        "learning_starts": 1024,
        "env": "CartPole-v1",
        "num_workers": 0,
        "num_envs_per_worker": 1,
        "rollout_fragment_length": 16,
        "gamma": 0.99,
        "lr": 1e-4,
        "grad_clip": 1000.0,
        "min_time_s_per_iteration": 0.0,
    },
):
    """DreamerV3 (Hafner et al. 2023, "Mastering Diverse Domains through World Models").

    A world model (the RSSM: a GRU's deterministic state and 32 categorical latents of 32
    classes, an encoder of symlog vector observations or images, a decoder, two-hot reward and
    Bernoulli continue heads) learns from replayed sequences; an actor and a critic learn from
    trajectories the world model imagines from every replayed state. ``lr`` is the world
    model's learning rate (``world_model_lr`` overrides it); ``grad_clip`` clips the global
    norm of all three's gradients in one step (the paper clips each, 1000 and 100).
    ``train_batch_size`` is not used: each train step replays ``batch_size`` sequences of
    ``batch_length`` steps, and ``train_ratio`` sets how many such steps follow the env
    steps sampled.
    """

    model_size: str = "XS"
    """A row of the paper's table (`MODEL_SIZES`): ``XS``, ``S``, ``M``, ``L`` or ``XL``; ``XS``
    suits a CPU."""
    train_ratio: float = 32.0
    """Replayed env steps trained on per env step sampled, in (0, 65536]: after each sampling
    round the learner takes ``sampled * train_ratio / (batch_size * batch_length)`` train
    steps (the fraction carried over). The paper uses 512 (Atari 100k: 1024)."""
    batch_size: int = 16
    """Sequences per train step, >= 1."""
    batch_length: int = 64
    """Steps per replayed sequence, >= 2 (a sequence may run across episodes: the RSSM starts
    over where one begins)."""
    imagination_horizon: int = 15
    """Steps imagined from every replayed state, >= 1."""
    gae_lambda: float = 0.95
    """The lambda of the imagined lambda-returns, in [0, 1]."""
    entropy_scale: float = 3e-4
    """Weight of the actor's entropy bonus, >= 0."""
    return_normalization_decay: float = 0.99
    """Decay of the EMA of the returns' 5th and 95th percentiles, in [0, 1); advantages are
    divided by ``max(1, P95 - P5)``."""
    slow_critic_decay: float = 0.98
    """Decay of the slow critic (an EMA of the critic's weights, updated every step), in
    [0, 1)."""
    slow_critic_regularizer: float = 1.0
    """Weight of the critic's loss towards the slow critic's predictions, >= 0."""
    world_model_lr: float | None = None
    """The world model's learning rate, > 0 (None: ``lr``)."""
    critic_lr: float = 3e-5
    """The critic's learning rate, > 0."""
    free_nats: float = 1.0
    """Free bits: each KL term is ``max(free_nats, KL)``, >= 0."""
    kl_dyn_scale: float = 0.5
    """Weight of the dynamics KL (trains the prior towards the posterior), >= 0."""
    kl_rep_scale: float = 0.1
    """Weight of the representation KL (keeps the posterior predictable), >= 0."""
    unimix: float = 0.01
    """Uniform mix of the latents' and the discrete actor's categoricals, in [0, 1)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self.model_size, self._label("model_size"), tuple(MODEL_SIZES))
        self._check_positive("train_ratio")
        if self.train_ratio > MAX_TRAIN_RATIO:
            raise self._bad(
                "train_ratio",
                f"must be <= {MAX_TRAIN_RATIO} (replayed steps per env step; the paper uses "
                "32 to 1024)",
            )
        self._check_int("batch_size", 1)
        self._check_int("batch_length", 2)
        self._check_int("imagination_horizon", 1)
        self._check_range("gae_lambda", 0.0, 1.0)
        self._check_range("entropy_scale", 0.0, float("inf"))
        self._check_range("return_normalization_decay", 0.0, 0.999999)
        self._check_range("slow_critic_decay", 0.0, 0.999999)
        self._check_range("slow_critic_regularizer", 0.0, float("inf"))
        if self.world_model_lr is not None:
            self._check_positive("world_model_lr")
        self._check_positive("critic_lr")
        self._check_range("free_nats", 0.0, float("inf"))
        self._check_range("kl_dyn_scale", 0.0, float("inf"))
        self._check_range("kl_rep_scale", 0.0, float("inf"))
        self._check_range("unimix", 0.0, 0.999)
        if self.replay_capacity < self.batch_length:
            raise self._bad("replay_capacity", f"must be >= batch_length={self.batch_length}")
        self._check_int("learning_starts", 1)
        if self.observation_filter != "NoFilter":
            raise self._bad(
                "observation_filter",
                "must be 'NoFilter': DreamerV3 squashes vector observations with symlog itself",
            )
        if self.num_learners:
            raise self._bad("num_learners", "must be 0: DreamerV3 trains on the driver")
        if self.model != ModelConfig():
            raise self._bad(
                "model",
                "must be the default: DreamerV3's networks (world model, actor, critic) are "
                "sized by model_size (XS, S, M, L, XL), not by model",
            )

    @property
    def size(self) -> ModelSize:
        """The row of `MODEL_SIZES` for ``model_size``."""
        return MODEL_SIZES[self.model_size]

    @property
    def replayed_steps_per_train_step(self) -> int:
        """``batch_size * batch_length``."""
        return self.batch_size * self.batch_length

"""`TwinQConfig`: the settings SAC and TD3 share: continuous actions, an actor and twin Q critics.

`rlflow.algorithms.q_learning.config.ReplayAlgorithmConfig`'s fields (and groups) plus the
twin-Q ones declared here (``actor_lr``, ``tau``, ``twin_q``), and two groups the
deterministic actors (TD3, MADDPG, MATD3) share: :class:`GaussianExplorationConfig` and
:class:`DelayedTargetsConfig` (TD3's fixes). Defaults: the replay family's,
with SAC's and TD3's shared ones in the class statement below (sampling on the learner, one
step per fragment, uniform replay, Polyak targets after every train step; RLlib SAC's
iterations of at least 100 env steps and 1 s, so reporting never paces a one-step round; an
actor and critics of two hidden layers of 256 with relu).
`rlflow.algorithms.twin_q.TwinQPolicy` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.q_learning.config import ReplayAlgorithmConfig
from rlflow.config.group import FieldGroup
from rlflow.config.learning import ActorLearningRateConfig
from rlflow.config.model import ModelConfig

__all__ = ["DelayedTargetsConfig", "GaussianExplorationConfig", "TwinQConfig"]


@dataclass(frozen=True, kw_only=True)
class TwinQConfig(
    ReplayAlgorithmConfig,
    ActorLearningRateConfig,
    defaults={
        "num_workers": 0,
        "rollout_fragment_length": 1,
        "train_batch_size": 256,
        "lr": 3e-4,
        "buffer_size": 1_000_000,
        "learning_starts": 1500,
        "prioritized_replay": False,
        "target_network_update_freq": 0,
        "min_steps_per_iteration": 100,
        "min_time_s_per_iteration": 1.0,
        "model": ModelConfig(hidden=(256, 256), activation="relu"),
    },
):
    """An actor and (twin) Q critics with Polyak-averaged targets, for Box actions (SAC, TD3).

    Three learning rates, as RLlib's ``optimization`` dict has: ``lr`` is the critics'
    (RLlib's ``critic_learning_rate``), ``actor_lr`` the actor's, and SAC's ``alpha_lr`` the
    entropy temperature's. ``lr_schedule`` is not supported (it would schedule one of three).
    ``model`` options (``hidden``, ``activation``) shape the actor and each critic alike.
    """

    tau: float = 5e-3
    """Polyak coefficient of the target networks, in (0, 1]: ``target <- tau * online + (1 -
    tau) * target`` at every target update (1: a copy)."""
    twin_q: bool = True
    """Two critics; targets and the actor use their minimum (clipped double Q)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lr_schedule is not None:
            raise self._bad(
                "lr_schedule", "is not supported here: set lr (critics), actor_lr and alpha_lr"
            )
        self._check_range("tau", 0.0, 1.0)
        if self.tau == 0:
            raise self._bad("tau", "must be a number > 0 (0 would freeze the targets)")


@dataclass(frozen=True, kw_only=True)
class GaussianExplorationConfig(FieldGroup):
    """Exploration of a deterministic actor with Box actions (TD3, MADDPG, MATD3): Gaussian
    noise in units of the Box's half-range ``(high - low) / 2``."""

    exploration_noise: float = 0.1
    """Std of the Gaussian noise added to the actor's Box action when exploring, in units of
    the Box's half-range, >= 0; the result is clipped to the Box. (MADDPG's and MATD3's Discrete
    members explore by sampling their actor's softmax instead.)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_range("exploration_noise", 0.0, float("inf"))


@dataclass(frozen=True, kw_only=True)
class DelayedTargetsConfig(FieldGroup):
    """TD3's fixes of a deterministic actor's learning (Fujimoto et al. 2018; TD3, MATD3):
    delayed actor and target updates, target policy smoothing. Noise in units of the Box's
    half-range ``(high - low) / 2`` (Fujimoto et al. write ``0.2 * max_action``)."""

    policy_delay: int = 2
    """Update the actor(s) (and Polyak-average the targets) once every this many critic
    updates, >= 1."""
    target_noise: float = 0.2
    """Std of the Gaussian noise on the target actor's Box action (target policy smoothing),
    >= 0. (MATD3's Discrete members smooth with a sample of the target actor's softmax.)"""
    target_noise_clip: float = 0.5
    """Clip the smoothing noise to +-this, >= 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("policy_delay", 1)
        for name in ("target_noise", "target_noise_clip"):
            self._check_range(name, 0.0, float("inf"))

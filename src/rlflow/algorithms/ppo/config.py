"""`PPOConfig`: proximal policy optimization settings (RLlib's names and defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.checks import check_bool
from rlflow.config import ActorCriticConfig
from rlflow.policy.entropy_schedule import EntropyScheduleConfig

__all__ = ["PPOConfig"]


@dataclass(frozen=True, kw_only=True)
class PPOConfig(EntropyScheduleConfig, ActorCriticConfig):
    """PPO: clipped surrogate, value loss, entropy bonus, GAE, optional adaptive KL penalty."""

    lr: float = 5e-5
    """Learning rate (Adam), > 0."""
    lambda_: float = 0.95
    """GAE lambda, in [0, 1]."""
    use_gae: bool = True
    """Use GAE(``lambda_``) advantages (else returns minus V(s))."""
    use_critic: bool = True
    """Learn a value function (needed by GAE)."""
    clip_param: float = 0.3
    """Clip the probability ratio to [1 - clip_param, 1 + clip_param], > 0."""
    vf_clip_param: float | None = None
    """Clip the value update around the old prediction by this much (> 0), or None."""
    vf_loss_coeff: float = 1.0
    """Weight of the value loss, >= 0."""
    entropy_coeff: float = 0.0
    """Weight of the entropy bonus, >= 0 (``entropy_coeff_schedule`` overrides it)."""
    kl_coeff: float = 0.2
    """Initial KL penalty coefficient, >= 0 (0: no penalty); adapted after each train step."""
    kl_target: float = 0.01
    """KL the adaptive coefficient steers towards, > 0."""
    num_sgd_iter: int = 30
    """Epochs over each train batch, >= 1."""
    sgd_minibatch_size: int = 128
    """Rows per SGD minibatch, >= 1 and <= train_batch_size."""
    sample_ahead: bool = False
    """Workers sample the next round while the learner trains on this one (wall clock down,
    each batch sampled with weights one update older: see ``policy_lag_mean``); False keeps
    PPO exactly synchronous and deterministic."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_positive("clip_param")
        if self.vf_clip_param is not None:
            self._check_positive("vf_clip_param")
        self._check_range("vf_loss_coeff", 0.0, float("inf"))
        self._check_range("entropy_coeff", 0.0, float("inf"))
        self._check_range("kl_coeff", 0.0, float("inf"))
        self._check_positive("kl_target")
        self._check_int("num_sgd_iter", 1)
        self._check_int("sgd_minibatch_size", 1)
        self._check_le("sgd_minibatch_size", "train_batch_size")
        check_bool(self.sample_ahead, self._label("sample_ahead"))

"""`PPOConfig`: proximal policy optimization settings (RLlib's names and defaults, but ``lr``).

Groups: `rlflow.config.ActorCriticConfig` (`AlgorithmConfig`'s groups plus the advantages) and,
from `rlflow.config.learning`, `LossWeightsConfig`, `SGDConfig`, `SurrogateConfig` and
`AdaptiveKLConfig`; PPO's own fields are ``vf_clip_param`` and ``sample_ahead``. Defaults: the
groups', with PPO's own in the class statement below.

``lr`` is 3e-4 (Adam's rate in the PPO paper's MuJoCo runs and Stable-Baselines3's default),
not RLlib's 5e-5: with RLlib's other defaults (4,000-step batches, 30 epochs of 128-row
minibatches, the adaptive KL penalty) 5e-5 left Hopper-v5 at a 20-episode mean of 378 after
200k env steps (seed 0), where SB3's PPO defaults reach 1,117; 3e-4 alone reaches 1,420 (seeds
1 and 2: 1,200 and 1,374, SB3 784 and 835). ``benchmarks/ppo_mujoco.py`` measures it (figures
in ``benchmarks/README.md``). The shipped tuned configs all set their own ``lr``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.checks import check_bool
from rlflow.config import ActorCriticConfig
from rlflow.config.learning import (
    AdaptiveKLConfig,
    LossWeightsConfig,
    SGDConfig,
    SurrogateConfig,
)

__all__ = ["PPOConfig"]


@dataclass(frozen=True, kw_only=True)
class PPOConfig(
    ActorCriticConfig,
    LossWeightsConfig,
    SGDConfig,
    SurrogateConfig,
    AdaptiveKLConfig,
    defaults={
        "lr": 3e-4,
        "lambda_": 0.95,
        "vf_loss_coeff": 1.0,
        "num_sgd_iter": 30,
        "sgd_minibatch_size": 128,
    },
):
    """PPO: clipped surrogate, value loss, entropy bonus, GAE, optional adaptive KL penalty."""

    vf_clip_param: float | None = None
    """Clip the value update around the old prediction by this much (> 0), or None."""
    sample_ahead: bool = False
    """Workers sample the next round while the learner trains on this one (wall clock down,
    each batch sampled with weights one update older: see ``policy_lag_mean``); False keeps
    PPO exactly synchronous and deterministic."""

    def __post_init__(self) -> None:
        # PPO's minibatches are shuffled rows, so 0 (IMPALA's "whole batch") is no size here;
        # checked before the SGD group's ">= 0" so that the message gives PPO's bound.
        self._check_int("sgd_minibatch_size", 1)
        super().__post_init__()
        if self.vf_clip_param is not None:
            self._check_positive("vf_clip_param")
        self._check_le("sgd_minibatch_size", "train_batch_size")
        check_bool(self.sample_ahead, self._label("sample_ahead"))

"""`MADDPGConfig`: MADDPG's settings (Lowe et al. 2017), RLlib's names where they exist.

`rlflow.algorithms.twin_q.config.TwinQConfig`'s fields (the replay ones included: ``lr`` is the
critics' learning rate, ``actor_lr`` the actors', ``tau`` the Polyak coefficient, ``twin_q``
two critics per member) plus `rlflow.algorithms.twin_q.config.GaussianExplorationConfig`
(``exploration_noise``, for Box members) and MADDPG's own below. Defaults: the MADDPG paper's
MPE settings where rlflow can express them (Lowe et al., appendix: Adam at 0.01, gamma 0.95,
batches of 1024, tau 0.01, two hidden layers of 64 relu units, a train step every 100 env steps:
one fragment of 100 steps per sampling round; a buffer of 1e6). The default env is a smoke
test: a team of ``multi_cartpole``'s two agents (`rlflow plan maddpg` shows the plan on it); the
tuned files (``mpe2.simple_spread_v3``, ``mpe2.simple_speaker_listener_v4``) are the settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.twin_q.config import GaussianExplorationConfig, TwinQConfig
from rlflow.config.model import ModelConfig

__all__ = ["CRITIC_INPUTS", "MADDPGConfig"]

CRITIC_INPUTS = ("observations", "state_and_observations")
"""What a member's critic sees besides every member's action (``critic_input``)."""


@dataclass(frozen=True, kw_only=True)
class MADDPGConfig(
    GaussianExplorationConfig,  # a group first: its fields come after TwinQConfig's
    TwinQConfig,
    defaults={
        "env": "multi_cartpole",
        "groups": {"team": ["agent_0", "agent_1"]},
        "num_workers": 0,
        "rollout_fragment_length": 100,
        "train_batch_size": 1024,
        "buffer_size": 1_000_000,
        "learning_starts": 1024,
        "lr": 0.01,
        "actor_lr": 0.01,
        "tau": 0.01,
        "gamma": 0.95,
        "twin_q": False,
        "min_steps_per_iteration": 1000,
        "model": ModelConfig(hidden=(64, 64), activation="relu"),
    },
):
    """MADDPG: a deterministic actor per team member on its own observation, a centralized
    critic per member on every member's observation and action, for a group's rows.

    Needs ``groups`` (`rlflow.config.rollouts.RolloutConfig.groups`): the team's observation
    space (a `rlflow.envs.groups.TeamBox`) names the members and where each one's observation
    is. ``model`` options (``hidden``, ``activation``) shape every actor and critic.
    ``twin_q`` (default off here) gives each member two critics, their minimum in the
    targets (MATD3's clipped double Q: `rlflow.algorithms.matd3`).
    """

    gumbel_temperature: float = 1.0
    """Discrete members: temperature of the straight-through Gumbel-softmax that makes an
    actor's action a differentiable one-hot for its critic, > 0 (lower: closer to the argmax,
    noisier gradients)."""
    actor_regularization: float = 1e-3
    """Weight of ``mean(actor_output ** 2)`` added to each actor's loss (the MADDPG code's
    regularizer on the actor's pre-activation outputs: logits or pre-tanh values), >= 0."""
    critic_input: str = "observations"
    """What each member's critic sees besides every member's action: ``"observations"`` (every
    member's own observation, side by side: the paper's ``Q_i(o_1..o_N, a_1..a_N)``) or
    ``"state_and_observations"`` (the env's global state too, where the env has one: PettingZoo's
    ``state()``; `rlflow.envs.groups.TeamBox`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_positive("gumbel_temperature")
        self._check_range("actor_regularization", 0.0, float("inf"))
        if self.critic_input not in CRITIC_INPUTS:
            allowed = ", ".join(repr(c) for c in CRITIC_INPUTS)
            raise self._bad("critic_input", f"must be one of {allowed}")

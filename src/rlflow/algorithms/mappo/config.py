"""`MAPPOConfig`: PPO's settings plus MAPPO's (Yu et al. 2022): parameter sharing, agent ids,
per-agent ratio clipping and value normalization.

Everything of `rlflow.algorithms.ppo.PPOConfig` keeps its meaning (the clipped surrogate, GAE,
minibatch epochs, the optional KL penalty, ``vf_clip_param``); the defaults follow MAPPO's MPE
runs where they differ from PPO's: ``lr`` 7e-4, 10 epochs, one minibatch per train batch
(``sgd_minibatch_size`` = ``train_batch_size``), entropy 0.01, no KL penalty, gradient norm
clipped at 10, ``gamma`` 0.99 and ``lambda_`` 0.95. The run needs ``groups`` (the team of
agents MAPPO trains: `rlflow.envs.groups`); the defaults are a runnable example (``env``
``multi_cartpole`` with its two agents as one team), so set both ``env`` and ``groups``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.ppo.config import PPOConfig
from rlflow.checks import check_bool, check_number
from rlflow.errors import ConfigError

__all__ = ["MAPPOConfig"]


@dataclass(frozen=True, kw_only=True)
class MAPPOConfig(
    PPOConfig,
    defaults={
        "env": "multi_cartpole",
        "groups": {"team": ["agent_0", "agent_1"]},
        "lr": 7e-4,
        "gamma": 0.99,
        "lambda_": 0.95,
        "num_sgd_iter": 10,
        "train_batch_size": 4000,
        "sgd_minibatch_size": 4000,
        "entropy_coeff": 0.01,
        "kl_coeff": 0.0,
        "vf_loss_coeff": 1.0,
        "grad_clip": 10.0,
    },
):
    """MAPPO: PPO with decentralized actors (each member's own observation) and a centralized
    critic (the team's global state). ``model.hidden`` and ``model.activation`` shape both;
    ``use_critic`` stays true and ``model.shared`` false (the actors and the critic read
    different inputs)."""

    share_policy: bool = True
    """One actor network for every member of the team (parameter sharing, MAPPO's default);
    False gives each member its own actor network (the critic is always one)."""
    agent_id_input: bool = True
    """With ``share_policy``, append the member's one-hot index to its observation, so a
    shared actor can act differently per member (EPyMARL's ``obs_agent_id``); ignored
    without sharing."""
    clip_per_agent: bool = True
    """Clip each member's probability ratio separately (MAPPO: the surrogate is averaged over
    members, each with its own ratio and the team's advantage); False clips the ratio of the
    joint action (the product of the members' ratios) as single-agent PPO would."""
    use_valuenorm: bool = True
    """The critic predicts value targets normalized by a running mean and standard deviation
    (MAPPO's ``use_valuenorm``), updated on every minibatch's targets before its loss; the
    statistics travel with the weights. False: the critic predicts returns as they are."""
    valuenorm_beta: float = 0.99999
    """Decay of the value normalization's running moments per update, in (0, 1) (MAPPO's
    0.99999; the moments are debiased, so early on they are close to plain averages)."""
    use_huber_loss: bool = False
    """The critic's loss is the Huber loss of its error with ``vf_huber_delta`` (MAPPO's
    ``use_huber_loss``, True in its runs), in the normalized units with ``use_valuenorm``
    (and clipped with ``vf_clip_param`` as the squared error is); False: PPO's squared
    error."""
    vf_huber_delta: float = 10.0
    """The value loss's Huber threshold, > 0: quadratic within it, linear beyond (MAPPO's
    ``huber_delta``, 10; named for the value function here, as ``vf_clip_param`` is, since DQN's
    ``huber_delta`` is another field)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in (
            "share_policy",
            "agent_id_input",
            "clip_per_agent",
            "use_valuenorm",
            "use_huber_loss",
        ):
            check_bool(getattr(self, name), self._label(name))
        if self.use_critic is not True:
            raise self._bad(
                "use_critic", "but MAPPO's centralized critic is what it is; set it to true"
            )
        if self.model.shared:
            raise ConfigError(
                f"{self._label('model')}.shared=True: MAPPO's actors read the members' own "
                "observations and its critic the global state, so they share no trunk; set "
                "model.shared to false"
            )
        check_number(
            self.valuenorm_beta,
            self._label("valuenorm_beta"),
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
        )
        self._check_positive("vf_huber_delta")

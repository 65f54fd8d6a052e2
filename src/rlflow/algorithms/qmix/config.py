"""`QMIXConfig`: QMIX's settings (and VDN's, `rlflow.algorithms.vdn`): DQN's replay, target
network, double Q and epsilon schedule, plus the team's agent networks and the mixer.

The team is one agent of a grouped env (``groups``, `rlflow.envs.groups`): each replayed item
is a sequence of ``replay_sequence_length`` team steps (a whole episode when it is as long as
the episodes), started from the agents' recurrent states at its first step. ``train_batch_size``,
``buffer_size`` and ``learning_starts`` count team steps (env steps), as DQN's do (a replayed
batch is ``train_batch_size // replay_sequence_length`` sequences). The agent network is
``model.hidden`` (relu), a GRU of ``model.lstm_cell_size`` units, a linear head of Q-values
(EPyMARL's RNN agent); the defaults are EPyMARL's QMIX ones where rlflow has them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.algorithms.q_learning.config import SequenceReplayConfig
from rlflow.checks import check_bool
from rlflow.config.model import ModelConfig

__all__ = ["MIXERS", "QMIXConfig"]

MIXERS = ("qmix", "vdn", "none")
"""The mixers: QMIX's monotonic hypernetwork mixer, VDN's sum, none (independent Q-learners
sharing the replay: each agent's own Q-value learns from the team reward)."""


@dataclass(frozen=True, kw_only=True)
class QMIXConfig(
    DQNConfig,
    SequenceReplayConfig,
    defaults={
        "env": "two_step_game",
        "groups": {"team": ["agent_0", "agent_1"]},
        "replay_sequence_length": 25,
        "lr": 5e-4,
        "grad_clip": 10.0,
        "dueling": False,
        "prioritized_replay": False,
        "buffer_size": 125_000,
        "learning_starts": 800,
        "train_batch_size": 800,
        "rollout_fragment_length": 25,
        "target_network_update_freq": 5000,
        "initial_epsilon": 1.0,
        "final_epsilon": 0.05,
        "epsilon_timesteps": 50_000,
        "min_steps_per_iteration": 1000,
        "model": ModelConfig(hidden=(64,), activation="relu", use_gru=True, lstm_cell_size=64),
    },
):
    """QMIX (Rashid et al., ICML 2018): per-agent recurrent Q networks mixed into Q_tot by a
    monotonic network conditioned on the global state; trained end to end on the team reward.

    The default env is the two-step game of the QMIX paper with its two agents as the team
    (`rlflow.envs.ma_envs.TwoStepGame`); another env needs its own ``groups``.

    Units: "steps" are team steps (env steps) sampled unless stated otherwise;
    ``replay_sequence_length`` as long as the episodes replays whole episodes, as QMIX does.
    The agent network always has memory: a ``model`` with neither ``use_gru`` nor ``use_lstm``
    gets ``use_gru``; ``use_lstm`` is refused (the agents' state is one GRU state each).
    """

    mixer: str = "qmix"
    """How the agents' Q-values make Q_tot: ``"qmix"`` (monotonic mixing network whose weights
    hypernetworks make from the global state), ``"vdn"`` (their sum) or ``"none"`` (no mixing:
    each agent learns its own Q-value from the team reward, independent Q-learning)."""
    mixing_embed_dim: int = 32
    """Units of the mixing network's hidden layer, >= 1 (QMIX's 32)."""
    hypernet_layers: int = 2
    """Layers of the hypernetworks that make the mixing weights, 1 or 2 (QMIX's 2 with
    ``hypernet_embed`` hidden units; 1: a linear map of the state)."""
    hypernet_embed: int = 64
    """Hidden units of two-layer hypernetworks, >= 1 (QMIX's 64)."""
    share_parameters: bool = True
    """One agent network for every member (its input has the agent's one-hot id with
    ``obs_agent_id``); false: a network per member."""
    obs_agent_id: bool = True
    """With ``share_parameters``, append the member's one-hot id to its observation
    (EPyMARL's name); ignored without sharing."""
    td_loss: str = "mse"
    """The TD loss: ``"mse"`` (QMIX's squared error, halved) or ``"huber"`` (with
    ``huber_delta``)."""
    standardize_rewards: bool = False
    """Learn from the team rewards standardized by their running mean and variance over every
    replayed batch, ``(r - mean) / std`` (EPyMARL's ``standardise_rewards``, True in its
    configs; its count starts at 1e-4, its variance at 1). The statistics are buffers of the
    model (checkpointed, sent with the weights). Subtracting the mean shifts the values the
    agents learn (an episode of a fixed length keeps its greedy policy; one whose length the
    agents decide does not); False: the rewards as they are (rlflow's DQN)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_model()
        if self.mixer not in MIXERS:
            raise self._bad("mixer", f"must be one of {', '.join(map(repr, MIXERS))}")
        self._check_int("mixing_embed_dim", 1)
        if self.hypernet_layers not in (1, 2):
            raise self._bad("hypernet_layers", "must be 1 or 2")
        self._check_int("hypernet_embed", 1)
        if self.td_loss not in ("mse", "huber"):
            raise self._bad("td_loss", "must be 'mse' or 'huber'")
        check_bool(self.standardize_rewards, self._label("standardize_rewards"))
        if self.train_batch_size < self.replay_sequence_length:
            raise self._bad(
                "train_batch_size",
                f"must be >= replay_sequence_length={self.replay_sequence_length} (team steps "
                "of whole sequences per replayed batch)",
            )
        if self.dueling:
            raise self._bad("dueling", "is not supported by QMIX's agent networks (set false)")
        if self.worker_side_prioritization:
            raise self._bad("worker_side_prioritization", "is not supported by QMIX (set false)")
        if self.observation_filter != "NoFilter":
            raise self._bad(
                "observation_filter",
                "is not supported by QMIX: the team's observation holds its members' action "
                "masks, which a filter would rescale (set NoFilter)",
            )
        if self.per_worker_exploration:
            raise self._bad("per_worker_exploration", "is not supported by QMIX (set false)")

    def _check_model(self) -> None:
        """The agent network's options: a GRU (given when neither cell is), no custom model."""
        model = self.model
        if model.use_lstm:
            raise self._bad(
                "model", "use_lstm is not supported (the agent networks are GRUs: use_gru)"
            )
        if model.custom_model is not None:
            raise self._bad("model", "custom_model is not supported by QMIX's agent networks")
        if not model.use_gru:
            gru = dataclasses.replace(model, use_gru=True, where=self._label("model"))
            object.__setattr__(self, "model", gru)

"""`QMIXPolicy`: a team's recurrent agent networks trained through a mixer on the team reward.

Rashid et al., "QMIX: Monotonic Value Function Factorisation for Deep Multi-Agent
Reinforcement Learning" (ICML 2018); Sunehag et al., "Value-Decomposition Networks For
Cooperative Multi-Agent Learning" (AAMAS 2018) with ``mixer: vdn``. The policy acts for one
group of a grouped env (``groups``, `rlflow.envs.groups`): its observation is a `TeamBox` (the
members' observations and action masks, the global state), its action a ``MultiDiscrete`` of
the members' actions, its reward the team's.

Acting: every member's Q-values from its own observation and GRU state
(`rlflow.algorithms.qmix.model.TeamQNetwork`); each member takes its greedy legal action, or
with probability epsilon (DQN's schedule over the global timestep) a uniform legal one. Illegal
actions (the member's action mask, or beyond its action count) are never chosen.

Learning, on replayed sequences of ``n`` team steps (from the agents' stored states, closed by
the observation after the last step; `rlflow.replay.SequenceReplayBuffer`), for every step
``t < n``::

    Q_tot(t)  = mixer([Q_a(o_a,t, u_a,t)]_a, s_t)
    u*_a      = argmax over a's legal actions of Q_a(o_a,t+m, .)       (double Q; else Q_a^-)
    G_t       = sum_{k<m} gamma^k r_{t+k}        (r standardized with standardize_rewards)
    target    = G_t + gamma^m (1 - done) mixer^-([Q_a^-(o_a,t+m, u*_a)]_a, s_t+m)
    loss      = mean over the steps of w * (Q_tot(t) - target)^2 / 2   (or Huber)

with ``m = min(n_step, n - t)``, ``^-`` the target network (agents and mixer, copied every
``target_network_update_freq`` steps), ``w`` the importance weight (1 without prioritized
replay) and ``done`` whether the episode ended there. With ``mixer: none`` each member's own
Q-value learns from the team reward (independent Q-learning). Gradients flow through the
agents and the mixer together; the stat `TD_ERROR` is each sequence's mean |TD error| (its
priority with ``prioritized_replay``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from gymnasium import spaces
from torch import nn

from rlflow.algorithms.dqn.policy import DQNPolicy, huber
from rlflow.algorithms.qmix.actor import QMIXAgentActor
from rlflow.algorithms.qmix.config import QMIXConfig
from rlflow.algorithms.qmix.model import (
    RewardStandardizer,
    TeamQNetwork,
    member_observation_size,
)
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    LOGP,
    OBS,
    REWARDS,
    SEQ_STEPS,
    SEQ_TERMINATED,
    TD_ERROR,
    VF_PREDS,
    WEIGHTS,
    SampleBatch,
)
from rlflow.envs.groups import TeamBox
from rlflow.errors import ConfigError
from rlflow.models.actors import ActorExport
from rlflow.models.masking import MASKED_LOGIT
from rlflow.models.memory import RecurrentInputs, state_out_key, stored_state

__all__ = ["QMIXPolicy"]

Array = npt.NDArray[Any]


class QMIXPolicy(DQNPolicy):
    """QMIX's (VDN's) policy for one team: agent networks, mixer, their targets (module
    docstring). Acting returns the members' joint action ``[B, n]``; :meth:`export_agent_models`
    gives each member's network alone, for decentralized execution."""

    config: QMIXConfig
    config_class: ClassVar[type[AlgorithmConfig]] = QMIXConfig
    observation_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Box,)
    action_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.MultiDiscrete,)
    requires_next_obs: ClassVar[bool] = False
    requires_bootstrap_rows: ClassVar[bool] = True
    supports_recurrent: ClassVar[bool] = True

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: QMIXConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Check the team's spaces (`ConfigError` before any network is built), then build the
        networks and their target."""
        name = type(self).__name__
        if not isinstance(observation_space, TeamBox):
            raise ConfigError(
                f"{name}: QMIX and VDN train a team of agents, but the policy observes "
                f"{observation_space}, not a team; set groups: {{team: [agent ids]}} (the env "
                "must be multi-agent; rlflow.envs.groups)"
            )
        if not isinstance(action_space, spaces.MultiDiscrete):
            raise ConfigError(
                f"{name}: the team's members act in {action_space}; QMIX and VDN need Discrete "
                "actions for every member (a MultiDiscrete team action)"
            )
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )

    @property
    def reward_stats(self) -> RewardStandardizer | None:
        """The running reward statistics (``standardize_rewards``), else None."""
        stats = getattr(self.model, "reward_stats", None)
        return stats if isinstance(stats, RewardStandardizer) else None

    @property
    def team(self) -> TeamBox:
        """The team's observation space (its layout)."""
        assert isinstance(self.observation_space, TeamBox)
        return self.observation_space

    @property
    def num_actions(self) -> int:
        """The Q-values per member: the team's largest action count."""
        return int(np.max(self.action_space.nvec))  # type: ignore[attr-defined]

    @property
    def max_seq_len(self) -> int:
        """Team steps per replayed sequence (``replay_sequence_length``)."""
        return self.config.replay_sequence_length

    def make_model(self) -> nn.Module:
        """The `TeamQNetwork` (agent networks and mixer) of the config."""
        config, model = self.config, self.config.model
        return TeamQNetwork(
            self.team,
            [int(n) for n in np.asarray(self.action_space.nvec).ravel()],  # type: ignore[attr-defined]
            mixer=config.mixer,
            share_parameters=config.share_parameters,
            obs_agent_id=config.obs_agent_id,
            hidden=model.hidden,
            activation=model.activation,
            cell_size=model.lstm_cell_size,
            mixing_embed_dim=config.mixing_embed_dim,
            hypernet_layers=config.hypernet_layers,
            hypernet_embed=config.hypernet_embed,
            standardize_rewards=config.standardize_rewards,
        )

    # -- acting -----------------------------------------------------------------------------

    def _q_values(
        self, obs: npt.ArrayLike, memory: RecurrentInputs | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Every member's Q-values ``[B, n, A]`` (illegal at `MASKED_LOGIT`) and the state."""
        q_flat, _, state = self.model_step(obs, memory)
        return q_flat.reshape(q_flat.shape[0], self.team.num_agents, -1).cpu(), state

    def compute_actions(
        self, obs: npt.ArrayLike, *, explore: bool = True, memory: RecurrentInputs | None = None
    ) -> tuple[Array, dict[str, Array]]:
        """The joint actions ``[B, n]``: each member's greedy legal action, or with
        ``explore`` a uniform legal one with probability epsilon (each member on its own).
        Extra columns: `ACTION_DIST_INPUTS` (the Q-values ``[B, n * A]``), `VF_PREDS` (the
        sum of the members' greedy Q-values), `LOGP` (0) and the state after the step."""
        with torch.no_grad():
            q, state_out = self._q_values(obs, memory)
        actions = q.argmax(dim=-1)  # [B, n]
        if explore:
            legal = (q > MASKED_LOGIT / 2).float().reshape(-1, q.shape[-1])
            random = torch.multinomial(legal, 1, generator=self.generator).reshape(actions.shape)
            draw = torch.rand(actions.shape, generator=self.generator) < self.epsilon()
            actions = torch.where(draw, random, actions)
            self._acted_since_push += int(actions.shape[0])
        best = q.max(dim=-1).values.sum(dim=-1)
        extra = {
            LOGP: np.zeros(len(actions), dtype=np.float32),
            VF_PREDS: best.numpy(),
            ACTION_DIST_INPUTS: q.reshape(q.shape[0], -1).numpy(),
        }
        for k, tensor in enumerate(state_out):
            extra[state_out_key(k)] = tensor.cpu().numpy()
        return actions.numpy(), extra

    def value(self, obs: npt.ArrayLike, *, memory: RecurrentInputs | None = None) -> Array:
        """The sum of the members' greedy Q-values ``[B]``, without gradients."""
        with torch.no_grad():
            q, _ = self._q_values(obs, memory)
        return q.max(dim=-1).values.sum(dim=-1).numpy()

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """The fragment's rows as they are (copied: the worker reuses its buffers); targets
        are computed on replayed sequences."""
        return batch.copy()

    # -- learning ---------------------------------------------------------------------------

    def _sequence_td(self, t: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(td, mask)``: ``Q_tot - target`` at each step of the replayed sequences, ``[S, L]``
        (``[S, L, n]`` without a mixer; gradient through Q_tot only), and which are steps."""
        model: TeamQNetwork = self.model  # type: ignore[assignment]
        target_model: TeamQNetwork = self.target_model  # type: ignore[assignment]
        obs, state = t[OBS], stored_state(t)
        width = int(obs.shape[1])
        length = width - 1
        steps = t[SEQ_STEPS].long()
        positions = torch.arange(length, device=obs.device)
        mask = positions[None, :] < steps[:, None]  # [S, L]
        q, _ = model.agent_q(obs, state)  # [S, W, n, A]
        actions = t[ACTIONS].long().reshape(*obs.shape[:2], -1)  # [S, W, n]
        q_taken = q.gather(3, actions.unsqueeze(-1)).squeeze(-1)
        rows = torch.arange(width, device=obs.device)[None, :] < steps[:, None]
        q_taken = torch.where(rows[..., None], q_taken, torch.zeros_like(q_taken))
        q_tot = model.mix(q_taken, obs)[:, :length]
        with torch.no_grad():
            q_target, _ = target_model.agent_q(obs, state)
            chooser = q.detach() if self.config.double_q else q_target
            best = chooser.argmax(dim=-1, keepdim=True)
            q_best = q_target.gather(3, best).squeeze(-1)  # [S, W, n]
            boot_valid = torch.arange(width, device=obs.device)[None, :] <= steps[:, None]
            q_best = torch.where(boot_valid[..., None], q_best, torch.zeros_like(q_best))
            target_tot = target_model.mix(q_best, obs)  # [S, W] or [S, W, n]
            rewards = t[REWARDS].float()
            stats = self.reward_stats
            if stats is not None:  # EPyMARL: update on the replayed batch, then standardize
                stats.update(rewards[:, :length][mask])
                rewards = stats(rewards)
            gamma, n_step = float(self.config.gamma), self.config.n_step
            returns = torch.zeros(q_tot.shape[:2], device=obs.device)
            for k in range(n_step):  # rewards beyond the sequence's steps left out
                at = positions + k
                inside = at[None, :] < steps[:, None]
                reward = rewards.gather(1, at.clamp(max=width - 1).expand_as(returns))
                returns = returns + (gamma**k) * reward * inside
            m = (steps[:, None] - positions[None, :]).clamp(min=1, max=n_step)
            boot = (positions[None, :] + m).clamp(max=width - 1)  # [S, L]
            if target_tot.dim() == 3:
                index = boot.unsqueeze(-1).expand(-1, -1, target_tot.shape[-1])
                returns, m = returns.unsqueeze(-1), m.unsqueeze(-1)
            else:
                index = boot
            boot_q = target_tot.gather(1, index)
            done = t[SEQ_TERMINATED].bool()[:, None] & (
                positions[None, :] + m.reshape(boot.shape) >= steps[:, None]
            )
            if target_tot.dim() == 3:
                done = done.unsqueeze(-1)
            target = returns + (gamma ** m.float()) * (~done).float() * boot_q
        return q_tot - target, mask

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """The (importance-weighted) squared or Huber TD loss of Q_tot over every step of the
        replayed sequences; stats: ``mean_td_error`` and each sequence's `TD_ERROR`."""
        td, mask = self._sequence_td(batch_tensors)
        maskf = mask.float()
        if td.dim() == 3:  # no mixer: every member's own TD error
            maskf = maskf.unsqueeze(-1).expand_as(td)
        if self.config.td_loss == "mse":
            per_step = 0.5 * td.pow(2) * maskf
        else:
            per_step = huber(td, self.config.huber_delta) * maskf
        weights = batch_tensors.get(WEIGHTS)
        if weights is not None:
            per_step = per_step * weights.float().reshape(-1, *([1] * (td.dim() - 1)))
        count = maskf.sum().clamp(min=1.0)
        total = per_step.sum() / count
        with torch.no_grad():
            abs_td = td.abs() * maskf
            per_sequence = abs_td.reshape(len(td), -1).sum(1) / maskf.reshape(len(td), -1).sum(
                1
            ).clamp(min=1.0)
        stats: dict[str, Any] = {"mean_td_error": abs_td.sum() / count, TD_ERROR: per_sequence}
        if self.reward_stats is not None:
            stats["reward_mean"] = self.reward_stats.mean.float()
            stats["reward_std"] = self.reward_stats.var.sqrt().float()
        return total, stats

    # -- export -----------------------------------------------------------------------------

    def export_model(self) -> ActorExport:
        """Refused: a team exports one policy per member (:meth:`export_agent_models`)."""
        raise ConfigError(
            f"{type(self).__name__}: a team policy exports one policy per member "
            "(export_agent_models; Trainer.export_policy writes a directory per member)"
        )

    def export_agent_models(self) -> dict[str, ActorExport]:
        """Each member's agent network, acting from the member's own observation (and action
        mask) alone: a `QMIXAgentActor` (no mixer, no global state), its one-hot id baked in
        with shared parameters. Each export carries the member's own spaces."""
        team, config = self.team, self.config
        model: TeamQNetwork = self.model  # type: ignore[assignment]
        sizes = [int(n) for n in np.asarray(self.action_space.nvec).ravel()]  # type: ignore[attr-defined]
        per = team.agent_obs_size + team.agent_mask_size
        out: dict[str, ActorExport] = {}
        for i, agent in enumerate(team.agent_ids):
            net = model.agents[0 if model.share_parameters else i]
            weights = {
                f"net.{k}": v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()
            }
            size = member_observation_size(team, i)
            start = i * per
            low = np.concatenate(
                [
                    team.low[start : start + size],
                    team.low[start + team.agent_obs_size : start + per],
                ]
            )
            high = np.concatenate(
                [
                    team.high[start : start + size],
                    team.high[start + team.agent_obs_size : start + per],
                ]
            )
            options = {
                "obs_size": size,
                "padded_size": team.agent_obs_size,
                "mask_size": team.agent_mask_size,
                "agent_index": i,
                "id_size": team.num_agents if model.obs_agent_id else 0,
                "num_q": model.num_actions,
                "hidden": [int(h) for h in config.model.hidden],
                "activation": config.model.activation,
                "cell_size": model.cell_size,
                "epsilon": float(config.final_epsilon),
            }
            out[agent] = ActorExport(
                QMIXAgentActor,
                options,
                weights,
                observation_space=spaces.Box(low, high, dtype=np.float32),
                action_space=spaces.Discrete(sizes[i]),
            )
        return out

"""QMIX's networks: the team's recurrent agent networks and the mixers.

- :class:`TeamQNetwork`: every member's Q-values from its own observation (EPyMARL's RNN
  agent: linear + relu, a GRU cell, a linear head), one network shared by the members (their
  one-hot ids appended to the inputs) or one per member; illegal actions (the member's action
  mask, or an action index beyond its ``Discrete`` size) get `MASKED_LOGIT`. It holds the mixer
  too, so the policy's target network is one copy of both.
- :class:`QMixer`: ``Q_tot = elu(q . |W_1(s)| + b_1(s)) . |w_2(s)| + V(s)``, the weights made
  from the global state ``s`` by hypernetworks and taken in absolute value, so ``Q_tot`` is
  monotonic in every agent's Q-value (Rashid et al. 2018, section 4).
- :class:`VDNMixer`: ``Q_tot = sum_a q_a`` (Sunehag et al. 2018).
- :class:`RewardStandardizer`: the running mean and variance of the team rewards
  (``standardize_rewards``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from gymnasium import spaces
from torch import nn

from rlflow.envs.groups import TeamBox
from rlflow.models.masking import MASKED_LOGIT
from rlflow.models.recurrent import RecurrentActorCritic

__all__ = [
    "QMixer",
    "RewardStandardizer",
    "TeamQNetwork",
    "VDNMixer",
    "agent_network",
    "member_observation_size",
]


def agent_network(
    in_features: int, num_actions: int, *, hidden: Sequence[int], activation: str, cell_size: int
) -> RecurrentActorCritic:
    """One agent's recurrent Q network: rlflow's recurrent model (`rlflow.models.recurrent`,
    trunk ``hidden``, a GRU of ``cell_size``) whose policy head gives the Q-values (its value
    head is unused)."""
    return RecurrentActorCritic(
        spaces.Box(-1.0, 1.0, (in_features,)),
        spaces.Discrete(num_actions),
        hidden=tuple(int(h) for h in hidden),
        activation=activation,
        cell="gru",
        cell_size=cell_size,
    )


def member_observation_size(space: TeamBox, index: int) -> int:
    """Member ``index``'s own observation size in ``space`` (`TeamBox.agent_obs_sizes`)."""
    return space.agent_obs_sizes[index]


class RewardStandardizer(nn.Module):
    """The running mean and variance of rewards (EPyMARL's ``RunningMeanStd``: the count starts
    at ``epsilon``, the variance at 1; each update merges a batch's mean and unbiased variance
    by Chan et al.'s parallel formula). Buffers, so checkpoints and weights carry them.

    Args:
        epsilon: the initial count (the weight of the initial mean 0 and variance 1).

    >>> stats = RewardStandardizer()
    >>> stats.update(torch.tensor([1.0, 3.0]))
    >>> round(float(stats.mean), 3), round(float(stats.var), 3)
    (2.0, 2.0)
    >>> [round(x, 3) for x in stats(torch.tensor([2.0, 4.0])).tolist()]
    [0.0, 1.414]
    """

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, epsilon: float = 1e-4) -> None:
        """Start at mean 0, variance 1, count ``epsilon``."""
        super().__init__()
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("var", torch.ones((), dtype=torch.float64))
        self.register_buffer("count", torch.full((), float(epsilon), dtype=torch.float64))

    @torch.no_grad()
    def update(self, rewards: torch.Tensor) -> None:
        """Merge the mean and unbiased variance of ``rewards`` (any shape, >= 2 values)."""
        x = rewards.detach().double().reshape(-1)
        if x.numel() < 2:
            return
        batch_mean, batch_var, n = x.mean(), x.var(), float(x.numel())
        delta = batch_mean - self.mean
        total = self.count + n
        m2 = self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, rewards: torch.Tensor) -> torch.Tensor:
        """``(rewards - mean) / sqrt(var)`` with the current statistics."""
        return ((rewards - self.mean) / self.var.sqrt()).to(rewards.dtype)


class VDNMixer(nn.Module):
    """VDN's mixer: the sum of the agents' Q-values (the state is ignored)."""

    def forward(self, agent_qs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``Q_tot [...]`` for ``agent_qs [..., n]``."""
        return agent_qs.sum(dim=-1)


class QMixer(nn.Module):
    """QMIX's monotonic mixing network, its weights made by hypernetworks from the state.

    Args:
        num_agents: how many Q-values it mixes.
        state_size: the global state's size.
        embed_dim: the mixing network's hidden units (QMIX's 32).
        hypernet_layers: 1 (linear hypernetworks) or 2 (with ``hypernet_embed`` relu units).
        hypernet_embed: the two-layer hypernetworks' hidden units (QMIX's 64).
    """

    def __init__(
        self,
        num_agents: int,
        state_size: int,
        *,
        embed_dim: int = 32,
        hypernet_layers: int = 2,
        hypernet_embed: int = 64,
    ) -> None:
        """Build the hypernetworks."""
        super().__init__()
        self.num_agents = int(num_agents)
        self.embed_dim = int(embed_dim)

        def hyper(out: int) -> nn.Module:
            if hypernet_layers == 1:
                return nn.Linear(state_size, out)
            return nn.Sequential(
                nn.Linear(state_size, hypernet_embed), nn.ReLU(), nn.Linear(hypernet_embed, out)
            )

        self.hyper_w_1 = hyper(self.num_agents * self.embed_dim)
        self.hyper_w_final = hyper(self.embed_dim)
        self.hyper_b_1 = nn.Linear(state_size, self.embed_dim)
        self.V = nn.Sequential(
            nn.Linear(state_size, self.embed_dim), nn.ReLU(), nn.Linear(self.embed_dim, 1)
        )

    def forward(self, agent_qs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``Q_tot [...]`` for ``agent_qs [..., n]`` and states ``[..., state_size]``."""
        lead = agent_qs.shape[:-1]
        qs = agent_qs.reshape(-1, 1, self.num_agents)
        s = state.reshape(qs.shape[0], -1).float()
        w_1 = self.hyper_w_1(s).abs().view(-1, self.num_agents, self.embed_dim)
        b_1 = self.hyper_b_1(s).view(-1, 1, self.embed_dim)
        hidden = F.elu(torch.bmm(qs, w_1) + b_1)
        w_final = self.hyper_w_final(s).abs().view(-1, self.embed_dim, 1)
        v = self.V(s).view(-1, 1, 1)
        q_tot: torch.Tensor = (torch.bmm(hidden, w_final) + v).reshape(lead)
        return q_tot


class TeamQNetwork(nn.Module):
    """The members' recurrent Q networks on a team's observations (a `TeamBox`), and the
    mixer (the module docstring).

    Args:
        space: the team's observation space.
        action_sizes: each member's number of actions.
        mixer: ``"qmix"``, ``"vdn"`` or ``"none"``.
        share_parameters: one network for every member.
        obs_agent_id: append the member's one-hot id to its input (shared network only).
        hidden: the agent network's layers before the GRU.
        activation: their activation.
        cell_size: the GRU's units.
        mixing_embed_dim: as `QMixer`'s ``embed_dim``.
        hypernet_layers: as `QMixer`'s.
        hypernet_embed: as `QMixer`'s.
        standardize_rewards: hold a `RewardStandardizer` (``reward_stats``) for the loss.
    """

    def __init__(
        self,
        space: TeamBox,
        action_sizes: Sequence[int],
        *,
        mixer: str = "qmix",
        share_parameters: bool = True,
        obs_agent_id: bool = True,
        hidden: Sequence[int] = (64,),
        activation: str = "relu",
        cell_size: int = 64,
        mixing_embed_dim: int = 32,
        hypernet_layers: int = 2,
        hypernet_embed: int = 64,
        standardize_rewards: bool = False,
    ) -> None:
        """Build the agent networks and the mixer (and the reward statistics)."""
        super().__init__()
        self.space = space
        self.num_agents = space.num_agents
        self.num_actions = max(int(n) for n in action_sizes)
        self.share_parameters = bool(share_parameters)
        self.obs_agent_id = bool(obs_agent_id) and self.share_parameters
        self.cell_size = int(cell_size)
        in_features = space.agent_obs_size + (self.num_agents if self.obs_agent_id else 0)
        count = 1 if self.share_parameters else self.num_agents
        self.agents = nn.ModuleList(
            agent_network(
                in_features,
                self.num_actions,
                hidden=hidden,
                activation=activation,
                cell_size=cell_size,
            )
            for _ in range(count)
        )
        sizes = torch.as_tensor([int(n) for n in action_sizes])
        beyond = torch.arange(self.num_actions)[None, :] >= sizes[:, None]  # [n, A]
        self.register_buffer("beyond", beyond, persistent=False)
        self.mixer: nn.Module | None
        if mixer == "qmix":
            self.mixer = QMixer(
                self.num_agents,
                space.state_size,
                embed_dim=mixing_embed_dim,
                hypernet_layers=hypernet_layers,
                hypernet_embed=hypernet_embed,
            )
        elif mixer == "vdn":
            self.mixer = VDNMixer()
        else:
            self.mixer = None
        self.reward_stats = RewardStandardizer() if standardize_rewards else None

    def initial_state(self, batch_size: int) -> list[torch.Tensor]:
        """Zeros ``[batch_size, num_agents, cell_size]``: every member's GRU state."""
        device = next(self.agents[0].parameters()).device
        return [torch.zeros(batch_size, self.num_agents, self.cell_size, device=device)]

    def agent_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The members' network inputs ``[B, T, n, d]`` of team observations ``[B, T, D]``."""
        members: torch.Tensor = self.space.split(obs.float()).agents
        if not self.obs_agent_id:
            return members
        ids = torch.eye(self.num_agents, device=obs.device).expand(*members.shape[:2], -1, -1)
        return torch.cat([members, ids], dim=-1)

    def legal(self, obs: torch.Tensor) -> torch.Tensor:
        """Which actions each member may take, ``[B, T, n, A]`` (bool), for team observations
        ``[B, T, D]``: those within its action count and allowed by its action mask."""
        beyond: torch.Tensor = self.beyond  # type: ignore[assignment]
        allowed = ~beyond.expand(*obs.shape[:2], -1, -1)
        masks = self.space.split(obs).masks
        if masks is not None:
            width = min(self.num_actions, masks.shape[-1])
            from_mask = torch.ones_like(allowed)
            from_mask[..., :width] = masks[..., :width] > 0.5
            allowed = allowed & from_mask
        return allowed

    def agent_q(
        self, obs: torch.Tensor, state: Sequence[torch.Tensor]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Every member's Q-values ``[B, T, n, A]`` (illegal actions at `MASKED_LOGIT`) on team
        observations ``[B, T, D]`` from ``state`` (:meth:`initial_state`'s), and the state
        after them."""
        b, t = obs.shape[0], obs.shape[1]
        x = self.agent_inputs(obs)  # [B, T, n, d]
        h = state[0]  # [B, n, H]
        if self.share_parameters:
            flat = x.permute(0, 2, 1, 3).reshape(b * self.num_agents, t, -1)
            q, _, after = self.agents[0](flat, [h.reshape(b * self.num_agents, -1)])
            q = q.reshape(b, self.num_agents, t, -1).permute(0, 2, 1, 3)
            new_h = after[0].reshape(b, self.num_agents, -1)
        else:
            outs, states = [], []
            for i, net in enumerate(self.agents):
                q_i, _, after = net(x[:, :, i], [h[:, i]])
                outs.append(q_i)
                states.append(after[0])
            q = torch.stack(outs, dim=2)
            new_h = torch.stack(states, dim=1)
        q = q.masked_fill(~self.legal(obs), MASKED_LOGIT)
        return q, [new_h]

    def mix(self, agent_qs: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """``Q_tot [B, T]`` of the members' chosen Q-values ``[B, T, n]`` in the states of team
        observations ``[B, T, D]``; without a mixer, the Q-values themselves ``[B, T, n]``."""
        if self.mixer is None:
            return agent_qs
        out: torch.Tensor = self.mixer(agent_qs, self.space.split(obs.float()).state)
        return out

    def forward(
        self, obs: torch.Tensor, state: Sequence[torch.Tensor], *_: Any
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """The recurrent-model interface (`rlflow.models.recurrent`): ``(Q-values [B, T,
        n * A], zeros [B, T], state)``."""
        q, after = self.agent_q(obs, state)
        return q.flatten(-2), q.new_zeros(q.shape[:2]), after

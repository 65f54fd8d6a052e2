"""`MAPPOPolicy`: PPO's clipped surrogate with decentralized actors and a centralized critic.

Yu et al., "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games" (NeurIPS 2022
Datasets and Benchmarks). The policy acts for a team (`rlflow.envs.groups`): its observation
is a `TeamBox` (each member's observation and action mask, then the global state), its action
the members' actions side by side (``MultiDiscrete`` of Discrete members, or a ``Box`` of Box
members), its reward the team's. The model (:class:`MAPPOModel`) has

- **actors** (:class:`TeamActors`): member ``i``'s action distribution from member ``i``'s own
  observation only (plus its one-hot index with a shared network); its masked actions get the
  logit `rlflow.models.masking.MASKED_LOGIT`, so they are never sampled. One network for all
  members (``share_policy``) or one each;
- a **critic** on the global state only, ``V(s)``, giving the team's GAE advantages (one per
  team step, shared by the members);
- with ``use_valuenorm``, a :class:`ValueNorm`: the critic predicts normalized targets, and the
  values the workers see (`VF_PREDS`, the bootstrap) are denormalized.

The loss, for members ``i = 1..n`` with ``r_i = pi_i(a_i|o_i) / pi_old_i(a_i|o_i)`` and the team's
advantage ``A`` (per-agent clipping, MAPPO's, ``clip_per_agent``)::

    policy_loss = -mean_{batch, i}(min(r_i * A, clip(r_i, 1 - eps, 1 + eps) * A))
    policy_loss = -mean_batch(min(r * A, clip(r, 1 - eps, 1 + eps) * A)),  r = prod_i r_i
                                                                   (clip_per_agent False)
    vf_loss     = mean((V_n(s) - norm(V_t))^2)   (PPO's, clipped with vf_clip_param, normalized;
                                                  the Huber loss with use_huber_loss)
    loss        = policy_loss + kl_coeff * kl + vf_loss_coeff * vf_loss
                  - entropy_coeff * mean_i(entropy_i)

The joint action's log-probability (`LOGP`, what the rows store) is the sum of the members';
``pi_old_i`` is rebuilt from `ACTION_DIST_INPUTS`. Decentralized execution: each member's actor
exports alone (:meth:`MAPPOPolicy.export_agent_models`, a :class:`MemberActor` taking that
member's own observation and mask); :meth:`MAPPOPolicy.export_model` exports the team's actors
(:class:`TeamActor`, the team observation in, the joint action out; no critic).
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlflow.algorithms.mappo.config import MAPPOConfig
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    ADVANTAGES,
    OBS,
    VALUE_TARGETS,
    VF_PREDS,
)
from rlflow.envs.groups import TeamBox, team_space
from rlflow.errors import ConfigError
from rlflow.models.actors import ActorExport, ExportableActor
from rlflow.models.distributions import Categorical, DiagGaussian
from rlflow.models.masking import MASKED_LOGIT
from rlflow.models.nets import MLP

__all__ = [
    "MAPPOModel",
    "MAPPOPolicy",
    "MemberActor",
    "TeamActor",
    "TeamActors",
    "ValueNorm",
    "member_observation_space",
]

_POLICY_GAIN = 0.01
_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))


class ValueNorm(nn.Module):
    """Running mean and standard deviation of value targets (MAPPO's ``ValueNorm``).

    Debiased exponential moving averages of the targets' mean and mean square, decaying by
    ``beta`` per :meth:`update` (one minibatch); the variance is at least 0.01. Buffers, so the
    statistics are part of the model's weights and reach the workers with them.

    Args:
        beta: decay per update, in (0, 1).
        epsilon: the debiasing term's floor (no division by zero before the first update).

    >>> norm = ValueNorm(beta=0.5)
    >>> norm.update(torch.tensor([1.0, 3.0]))
    >>> round(float(norm.mean), 3), round(float(norm.std), 3)
    (2.0, 1.0)
    >>> norm.denormalize(norm.normalize(torch.tensor([5.0]))).tolist()
    [5.0]
    """

    running_mean: torch.Tensor
    running_mean_sq: torch.Tensor
    debiasing_term: torch.Tensor

    def __init__(self, beta: float, epsilon: float = 1e-5) -> None:
        """Start with no statistics (mean 0, standard deviation 0.1 until the first update)."""
        super().__init__()
        self.beta = float(beta)
        self.epsilon = float(epsilon)
        self.register_buffer("running_mean", torch.zeros(()))
        self.register_buffer("running_mean_sq", torch.zeros(()))
        self.register_buffer("debiasing_term", torch.zeros(()))

    @property
    def mean(self) -> torch.Tensor:
        """The debiased running mean."""
        return self.running_mean / self.debiasing_term.clamp(min=self.epsilon)

    @property
    def std(self) -> torch.Tensor:
        """The debiased running standard deviation (variance at least 0.01)."""
        mean_sq = self.running_mean_sq / self.debiasing_term.clamp(min=self.epsilon)
        return (mean_sq - self.mean.pow(2)).clamp(min=1e-2).sqrt()

    @torch.no_grad()
    def update(self, targets: torch.Tensor) -> None:
        """Move the statistics towards the mean and mean square of ``targets`` (any shape)."""
        x = targets.detach().float()
        beta = self.beta
        self.running_mean.mul_(beta).add_(x.mean() * (1.0 - beta))
        self.running_mean_sq.mul_(beta).add_(x.pow(2).mean() * (1.0 - beta))
        self.debiasing_term.mul_(beta).add_(1.0 - beta)

    def normalize(self, values: torch.Tensor) -> torch.Tensor:
        """``(values - mean) / std`` with the current statistics (no gradient to them)."""
        return (values - self.mean.detach()) / self.std.detach()

    def denormalize(self, values: torch.Tensor) -> torch.Tensor:
        """``values * std + mean`` with the current statistics."""
        return values * self.std.detach() + self.mean.detach()


def _split_team(
    obs: torch.Tensor, num_agents: int, obs_size: int, mask_size: int
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """``(members' observations [B, n, w], masks [B, n, m] or None, state [B, s])``: the
    `TeamBox.split` of a batch, from the layout's sizes."""
    per = obs_size + mask_size
    members = obs[..., : per * num_agents].reshape(*obs.shape[:-1], num_agents, per)
    masks = members[..., obs_size:] if mask_size else None
    return members[..., :obs_size], masks, obs[..., per * num_agents :]


class TeamActors(nn.Module):
    """The members' actors: member ``i``'s action-distribution inputs from its own observation.

    With ``share_policy`` one network (its input: the member's observation and, with
    ``agent_id_input``, its one-hot index; its output: as many values as the largest member
    needs, member ``i`` reading the first ones it needs), else one network per member. A
    Gaussian member's log standard deviations are parameters (one set shared by all members
    with ``share_policy``). Built from plain values (JSON options of an export).

    Args:
        num_agents: the team's size.
        agent_obs_size: a member's (padded) observation width in the team layout.
        agent_mask_size: a member's action-mask width (0: none).
        action_sizes: per member, its number of actions (Discrete) or action values (Box).
        continuous: Box members (Gaussian actions) instead of Discrete ones.
        hidden: hidden layer widths.
        activation: a key of `rlflow.models.nets.ACTIVATIONS`.
        share_policy: one network for all members.
        agent_id_input: append the one-hot member index to a shared network's input.
    """

    agent_ids: torch.Tensor

    def __init__(
        self,
        *,
        num_agents: int,
        agent_obs_size: int,
        agent_mask_size: int,
        action_sizes: list[int],
        continuous: bool,
        hidden: tuple[int, ...] | list[int],
        activation: str,
        share_policy: bool,
        agent_id_input: bool,
    ) -> None:
        """Build the networks (CleanRL's initialisation: policy heads at gain 0.01)."""
        super().__init__()
        self.num_agents = int(num_agents)
        self.agent_obs_size = int(agent_obs_size)
        self.agent_mask_size = int(agent_mask_size)
        self.action_sizes = [int(n) for n in action_sizes]
        self.continuous = bool(continuous)
        self.share_policy = bool(share_policy)
        self.agent_id_input = bool(agent_id_input) and self.share_policy
        hidden = tuple(int(h) for h in hidden)
        width = self.agent_obs_size + (self.num_agents if self.agent_id_input else 0)
        outs = [max(self.action_sizes)] if self.share_policy else self.action_sizes
        self.nets = nn.ModuleList(
            MLP(width, hidden, activation=activation, out_features=n, out_gain=_POLICY_GAIN)
            for n in outs
        )
        """One network (``share_policy``) or one per member."""
        self.log_std: nn.Parameter | None = None
        if self.continuous:
            size = max(self.action_sizes) if self.share_policy else sum(self.action_sizes)
            self.log_std = nn.Parameter(torch.zeros(size))
        self.register_buffer("agent_ids", torch.eye(self.num_agents), persistent=False)

    def options(self) -> dict[str, Any]:
        """The constructor's arguments as JSON values (what an export records)."""
        mlp = self.nets[0]
        assert isinstance(mlp, MLP)
        layers = list(mlp.net)
        hidden = [int(m.out_features) for m in layers if isinstance(m, nn.Linear)][:-1]
        names = {nn.Tanh: "tanh", nn.ReLU: "relu", nn.ELU: "elu"}
        acts = [names[type(m)] for m in layers if type(m) in names]
        return {
            "num_agents": self.num_agents,
            "agent_obs_size": self.agent_obs_size,
            "agent_mask_size": self.agent_mask_size,
            "action_sizes": list(self.action_sizes),
            "continuous": self.continuous,
            "hidden": hidden,
            "activation": acts[0] if acts else "tanh",
            "share_policy": self.share_policy,
            "agent_id_input": self.agent_id_input,
        }

    def member_log_std(self, index: int) -> torch.Tensor:
        """Member ``index``'s log standard deviations (Box members)."""
        assert self.log_std is not None
        size = self.action_sizes[index]
        if self.share_policy:
            return self.log_std[:size]
        start = sum(self.action_sizes[:index])
        return self.log_std[start : start + size]

    def member_outputs(
        self, agents: torch.Tensor, masks: torch.Tensor | None
    ) -> list[torch.Tensor]:
        """Per member ``i``: its logits (masked) or Gaussian means ``[B, action_sizes[i]]``, from
        the members' observations ``[B, n, w]`` (member ``i`` reads row ``i`` only)."""
        if self.share_policy:
            x = agents
            if self.agent_id_input:
                ids = self.agent_ids.to(agents.dtype).expand(*agents.shape[:-1], self.num_agents)
                x = torch.cat([agents, ids], dim=-1)
            out = self.nets[0](x)
            outs = [out[..., i, :n] for i, n in enumerate(self.action_sizes)]
        else:
            outs = [net(agents[..., i, :]) for i, net in enumerate(self.nets)]
        if masks is not None:
            outs = [o.masked_fill(masks[..., i, :] < 0.5, MASKED_LOGIT) for i, o in enumerate(outs)]
        return outs

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The joint action distribution's inputs ``[B, D]`` for team observations ``[B, size]``:
        the members' logits side by side (a `MultiCategorical`'s), or the members' means then
        their log standard deviations (a `DiagGaussian`'s)."""
        agents, masks, _ = _split_team(
            obs.float(), self.num_agents, self.agent_obs_size, self.agent_mask_size
        )
        outs = self.member_outputs(agents, masks)
        joint = torch.cat(outs, dim=-1)
        if not self.continuous:
            return joint
        log_std = torch.cat([self.member_log_std(i) for i in range(self.num_agents)])
        return torch.cat([joint, log_std.expand_as(joint)], dim=-1)

    def member_logp(self, dist_inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Each member's log-probability of its action, ``[B, n]``, under the joint
        distribution ``dist_inputs`` (`forward`'s layout); their sum is the joint's."""
        if not self.continuous:
            parts = torch.split(dist_inputs, self.action_sizes, dim=-1)
            index = actions.long()
            logps = [
                F.log_softmax(p, dim=-1).gather(-1, index[..., i : i + 1]).squeeze(-1)
                for i, p in enumerate(parts)
            ]
            return torch.stack(logps, dim=-1)
        mean, log_std = torch.chunk(dist_inputs, 2, dim=-1)
        z = (actions - mean) / log_std.exp()
        per_dim = -0.5 * z.pow(2) - log_std - _HALF_LOG_2PI
        parts = torch.split(per_dim, self.action_sizes, dim=-1)
        return torch.stack([p.sum(-1) for p in parts], dim=-1)


class MAPPOModel(nn.Module):
    """MAPPO's network: the members' actors (:class:`TeamActors`) and a critic on the global
    state, with an optional :class:`ValueNorm`.

    ``forward(team_obs) -> (joint dist_inputs [B, D], value [B])`` and ``value(team_obs)``, the
    value in the returns' own scale (denormalized), as `rlflow.policy.TorchPolicy` acts with it;
    :meth:`normalized_value` is what the critic's loss reads.

    Args:
        space: the team's observation space.
        continuous: Box members (Gaussian actions).
        hidden: hidden layer widths of the actors and the critic.
        activation: their activation.
        share_policy: one actor network for all members.
        agent_id_input: the member's one-hot index in a shared actor's input.
        use_valuenorm: normalize the critic's targets.
        valuenorm_beta: the normalization's decay per update.
    """

    def __init__(
        self,
        space: TeamBox,
        *,
        continuous: bool,
        hidden: tuple[int, ...],
        activation: str,
        share_policy: bool,
        agent_id_input: bool,
        use_valuenorm: bool,
        valuenorm_beta: float,
    ) -> None:
        """Build the actors, the critic and the normalization."""
        super().__init__()
        self.space = space
        self.actors = TeamActors(
            num_agents=space.num_agents,
            agent_obs_size=space.agent_obs_size,
            agent_mask_size=space.agent_mask_size,
            action_sizes=space.agent_action_sizes,
            continuous=continuous,
            hidden=hidden,
            activation=activation,
            share_policy=share_policy,
            agent_id_input=agent_id_input,
        )
        """The members' actors (only their own observations)."""
        self.critic = MLP(
            space.state_size, tuple(hidden), activation=activation, out_features=1, out_gain=1.0
        )
        """The centralized critic: V(global state)."""
        self.value_norm = ValueNorm(valuenorm_beta) if use_valuenorm else None
        """The value targets' running statistics, or None."""

    def _state(self, obs: torch.Tensor) -> torch.Tensor:
        a = self.actors
        return _split_team(obs.float(), a.num_agents, a.agent_obs_size, a.agent_mask_size)[2]

    def normalized_value(self, obs: torch.Tensor) -> torch.Tensor:
        """The critic's output ``[B]`` on the team observations' global state (normalized when
        ``use_valuenorm``)."""
        out: torch.Tensor = self.critic(self._state(obs)).squeeze(-1)
        return out

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(s)`` ``[B]`` in the returns' scale."""
        value = self.normalized_value(obs)
        return value if self.value_norm is None else self.value_norm.denormalize(value)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(joint dist_inputs, V(s))`` for team observations ``[B, size]``."""
        return self.actors(obs), self.value(obs)


def member_observation_space(space: TeamBox, index: int) -> gym.spaces.Box:
    """Member ``index``'s own flat observation space (its observation, then its action mask
    when the team has masks), cut from the team layout (`TeamBox.agent_obs_sizes`)."""
    per = space.agent_obs_size + space.agent_mask_size
    start = index * per
    low = np.asarray(space.low[start : start + space.agent_obs_size], np.float32)
    high = np.asarray(space.high[start : start + space.agent_obs_size], np.float32)
    size = space.agent_obs_sizes[index]
    mask = space.agent_mask_size
    low = np.concatenate([low[:size], np.zeros(mask, np.float32)])
    high = np.concatenate([high[:size], np.ones(mask, np.float32)])
    return gym.spaces.Box(low, high, (size + mask,), np.float32)


def member_action_space(space: TeamBox, action_space: gym.Space[Any], index: int) -> gym.Space[Any]:
    """Member ``index``'s own action space, cut from the team's joint one."""
    size = space.agent_action_sizes[index]
    if isinstance(action_space, gym.spaces.Box):
        start = sum(space.agent_action_sizes[:index])
        low = action_space.low[start : start + size]
        high = action_space.high[start : start + size]
        return gym.spaces.Box(low, high, (size,), np.float32)
    return gym.spaces.Discrete(size)


class TeamActor(ExportableActor):
    """An exported MAPPO team (:meth:`MAPPOPolicy.export_model`): the members' actors acting
    together from the team observation (each member still reads only its own part); no critic.
    Options: those of :class:`TeamActors`."""

    def __init__(
        self, observation_space: gym.Space[Any], action_space: gym.Space[Any], **options: Any
    ) -> None:
        """Build the actors (weights are loaded afterwards, under ``actors.``)."""
        super().__init__()
        self.actors = TeamActors(**options)
        self.dist_class = DiagGaussian if self.actors.continuous else None
        self.nvec = list(self.actors.action_sizes)

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The joint action distribution's inputs."""
        inputs: torch.Tensor = self.actors(obs)
        return inputs

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """The joint action: every member's mode, or a sample with ``explore``."""
        inputs = self.actors(obs).cpu()
        if self.actors.continuous:
            dist = DiagGaussian(inputs, generator=generator)
            return dist.sample() if explore else dist.deterministic()
        parts = torch.split(inputs, self.nvec, dim=-1)
        draws = [
            Categorical(p, generator=generator).sample()
            if explore
            else Categorical(p).deterministic()
            for p in parts
        ]
        return torch.stack(draws, dim=-1)


class MemberActor(ExportableActor):
    """One member's exported actor (:meth:`MAPPOPolicy.export_agent_models`): its action from
    its own observation (and action mask) alone; a shared network has the member's one-hot
    index built in, so nothing else is given.

    Args:
        observation_space: the member's own flat observation space (its mask last).
        action_space: the member's ``Discrete`` or ``Box`` action space.
        agent_obs_size: the padded width the network was trained on (the member's observation
            is zero-padded to it).
        agent_mask_size: the mask's width (0: none).
        agent_id: the member's one-hot index (empty: no index input).
        hidden: hidden layer widths.
        activation: the activation.
        out_features: the network's output width (at least the member's action size).
    """

    agent_id: torch.Tensor

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        agent_obs_size: int,
        agent_mask_size: int,
        agent_id: list[float],
        hidden: list[int],
        activation: str,
        out_features: int,
    ) -> None:
        """Build the network (weights are loaded afterwards)."""
        super().__init__()
        self.agent_obs_size = int(agent_obs_size)
        self.mask_size = int(agent_mask_size)
        self.register_buffer(
            "agent_id", torch.tensor(agent_id, dtype=torch.float32), persistent=False
        )
        self.continuous = isinstance(action_space, gym.spaces.Box)
        self.action_size = (
            int(action_space.shape[0]) if self.continuous else int(action_space.n)  # type: ignore[attr-defined,index]
        )
        width = self.agent_obs_size + len(agent_id)
        self.net = MLP(
            width,
            tuple(int(h) for h in hidden),
            activation=activation,
            out_features=int(out_features),
            out_gain=_POLICY_GAIN,
        )
        self.log_std = nn.Parameter(torch.zeros(self.action_size)) if self.continuous else None

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The member's logits (masked) or its Gaussian's mean and log standard deviation."""
        obs = obs.float()
        own = obs[..., : obs.shape[-1] - self.mask_size]
        pad = self.agent_obs_size - own.shape[-1]
        x = F.pad(own, (0, pad))
        if self.agent_id.numel():
            x = torch.cat([x, self.agent_id.expand(*x.shape[:-1], -1)], dim=-1)
        out: torch.Tensor = self.net(x)[..., : self.action_size]
        if self.mask_size:
            out = out.masked_fill(obs[..., -self.mask_size :] < 0.5, MASKED_LOGIT)
        if self.log_std is not None:
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """The member's action: the mode, or a sample with ``explore``."""
        inputs = self.action_inputs(obs).cpu()
        dist = (DiagGaussian if self.continuous else Categorical)(inputs, generator=generator)
        return dist.sample() if explore else dist.deterministic()

    @staticmethod
    def export_of(actors: TeamActors, index: int) -> ActorExport:
        """Member ``index``'s export from the team's actors (its network and log standard
        deviations only)."""
        options = actors.options()
        net = actors.nets[0 if actors.share_policy else index]
        weights = {f"net.{k}": v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}
        if actors.continuous:
            weights["log_std"] = actors.member_log_std(index).detach().cpu().numpy().copy()
        agent_id = [0.0] * actors.num_agents if actors.agent_id_input else []
        if agent_id:
            agent_id[index] = 1.0
        assert isinstance(net, MLP)
        member = {
            "agent_obs_size": options["agent_obs_size"],
            "agent_mask_size": options["agent_mask_size"],
            "agent_id": agent_id,
            "hidden": options["hidden"],
            "activation": options["activation"],
            "out_features": int(net.out_features),
        }
        return ActorExport(MemberActor, member, weights)


class MAPPOPolicy(PPOPolicy):
    """MAPPO's policy for one team (module docstring): decentralized actors, a centralized
    critic on the global state, per-agent ratio clipping, value normalization.

    Reads the batch columns `OBS` (team observations), `ACTIONS` (joint), `ADVANTAGES`,
    `ACTION_DIST_INPUTS`, `VALUE_TARGETS` and `VF_PREDS`. Stats: PPO's plus
    ``value_norm_mean`` and ``value_norm_std`` (with ``use_valuenorm``).
    """

    config: MAPPOConfig
    config_class: ClassVar[type[AlgorithmConfig]] = MAPPOConfig
    observation_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Box,)
    action_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.MultiDiscrete, gym.spaces.Box)
    supports_custom_model: ClassVar[bool] = False
    supports_recurrent: ClassVar[bool] = False

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: MAPPOConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Check that the spaces are a team's (`ConfigError` saying what to set), then build
        as `PPOPolicy` does."""
        self.team: TeamBox = _check_team_spaces(observation_space, action_space, config)
        """The team's observation layout."""
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )

    def make_model(self) -> nn.Module:
        """A :class:`MAPPOModel` for the team (``model.hidden`` and ``model.activation`` for the
        actors and the critic)."""
        config = self.config
        return MAPPOModel(
            self.team,
            continuous=isinstance(self.action_space, gym.spaces.Box),
            hidden=tuple(config.model.hidden),
            activation=config.model.activation,
            share_policy=config.share_policy,
            agent_id_input=config.agent_id_input,
            use_valuenorm=config.use_valuenorm,
            valuenorm_beta=config.valuenorm_beta,
        )

    def _vf_loss(self, values: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """PPO's value loss, or with ``use_huber_loss`` the Huber loss (``vf_huber_delta``) of
        the error, clipped around `VF_PREDS` the same way when ``vf_clip_param`` is set
        (MAPPO's: the larger of the plain and the clipped error's loss)."""
        if not self.config.use_huber_loss:
            return super()._vf_loss(values, batch)
        targets, delta = batch[VALUE_TARGETS], float(self.config.vf_huber_delta)
        err = F.huber_loss(values, targets, reduction="none", delta=delta)
        clip = self.config.vf_clip_param
        if clip is not None:
            old = batch[VF_PREDS]
            clipped = old + (values - old).clamp(-clip, clip)
            err = torch.max(err, F.huber_loss(clipped, targets, reduction="none", delta=delta))
        return err.mean()

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return MAPPO's loss on a (mini)batch and its parts as stats (updating the value
        normalization with the minibatch's targets first)."""
        model: MAPPOModel = self.model  # type: ignore[assignment]
        actors = model.actors
        obs, actions = batch_tensors[OBS], batch_tensors[ACTIONS]
        dist_inputs = actors(obs)
        old_inputs = batch_tensors[ACTION_DIST_INPUTS]
        log_ratio = actors.member_logp(dist_inputs, actions) - actors.member_logp(
            old_inputs, actions
        )
        adv = batch_tensors[ADVANTAGES]
        if self.config.clip_per_agent:
            ratio, adv = log_ratio.exp(), adv[:, None]
        else:
            ratio = log_ratio.sum(-1).exp()
        clip_param = self.config.clip_param
        clipped = ratio.clamp(1.0 - clip_param, 1.0 + clip_param)
        policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
        dist, old_dist = self.dist_class(dist_inputs), self.dist_class(old_inputs)
        kl = old_dist.kl(dist).mean()
        entropy = dist.entropy().mean() / actors.num_agents  # the members' mean
        total = policy_loss - self.entropy_coeff * entropy
        if self.kl_coeff > 0.0:
            total = total + self.kl_coeff * kl
        values = model.normalized_value(obs)
        vf_batch = batch_tensors
        stats: dict[str, Any] = {}
        norm = model.value_norm
        if norm is not None:
            norm.update(batch_tensors[VALUE_TARGETS])
            vf_batch = {
                **batch_tensors,
                VALUE_TARGETS: norm.normalize(batch_tensors[VALUE_TARGETS]),
                VF_PREDS: norm.normalize(batch_tensors[VF_PREDS]),
            }
            stats = {"value_norm_mean": norm.mean.detach(), "value_norm_std": norm.std.detach()}
        vf_loss = self._vf_loss(values, vf_batch)
        total = total + self.config.vf_loss_coeff * vf_loss
        clip_frac = ((ratio - 1.0).abs() > clip_param).float().mean()
        stats = {
            "policy_loss": policy_loss,
            "vf_loss": vf_loss,
            "entropy": entropy,
            "kl": kl,
            "kl_coeff": self.kl_coeff,
            "clip_frac": clip_frac,
            **stats,
        }
        return total, stats

    def export_model(self) -> ActorExport:
        """The team's actors as one :class:`TeamActor` (the team observation in, the joint
        action out; no critic); :meth:`export_agent_models` gives one actor per member."""
        model: MAPPOModel = self.model  # type: ignore[assignment]
        weights = {
            f"actors.{k}": v.detach().cpu().numpy().copy()
            for k, v in model.actors.state_dict().items()
        }
        return ActorExport(TeamActor, model.actors.options(), weights)

    def export_agent_models(self) -> dict[str, ActorExport]:
        """Per member (by agent id): its own actor, a :class:`MemberActor` acting from the
        member's own observation and mask (:meth:`agent_spaces`) alone; no critic."""
        model: MAPPOModel = self.model  # type: ignore[assignment]
        return {
            agent: MemberActor.export_of(model.actors, i)
            for i, agent in enumerate(self.team.agent_ids)
        }

    def agent_spaces(self) -> dict[str, tuple[gym.Space[Any], gym.Space[Any]]]:
        """Per member: ``(its own observation space, its own action space)``, what its
        :meth:`export_agent_models` actor is built with (`member_observation_space`)."""
        return {
            agent: (
                member_observation_space(self.team, i),
                member_action_space(self.team, self.action_space, i),
            )
            for i, agent in enumerate(self.team.agent_ids)
        }


def _check_team_spaces(
    observation_space: gym.Space[Any], action_space: gym.Space[Any], config: MAPPOConfig
) -> TeamBox:
    """The team layout of ``observation_space``; `ConfigError` saying what to change when the
    spaces are not a team's MAPPO can train."""
    team = team_space(observation_space)
    if team is None:
        raise ConfigError(
            f"MAPPOPolicy: the observation space {observation_space} is not a team's; MAPPO "
            "trains teams of agents: set groups: {team: [<agent ids>]} (rlflow.envs.groups) "
            f"naming every agent of the env in a team (groups is {config.groups})"
        )
    if isinstance(action_space, gym.spaces.Box):
        if team.agent_mask_size:
            raise ConfigError(
                "MAPPOPolicy: the members' observations carry action masks, but their actions "
                "are continuous (Box); masks need Discrete actions"
            )
    elif isinstance(action_space, gym.spaces.MultiDiscrete):
        sizes = set(team.agent_action_sizes)
        if team.agent_mask_size and sizes != {team.agent_mask_size}:
            raise ConfigError(
                f"MAPPOPolicy: the members' action masks have {team.agent_mask_size} values, "
                f"but their action counts are {team.agent_action_sizes}; a mask needs one flag "
                "per action"
            )
    else:
        raise ConfigError(
            f"MAPPOPolicy: the team's action space {action_space} is neither the members' "
            "Discrete actions (MultiDiscrete) nor their Box actions"
        )
    if config.observation_filter != "NoFilter":
        raise ConfigError(
            f"MAPPOConfig.observation_filter={config.observation_filter!r}: MAPPO reads the team "
            "layout (action masks, global state) from the raw observations; use 'NoFilter'"
        )
    return team

"""`MADDPGPolicy`: a deterministic actor per team member, a centralized critic per member.

Lowe et al., "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive Environments" (NeurIPS
2017), Algorithm 1, for one group's rows (`rlflow.envs.groups`: a row holds every member's
observation, the joint action, the team reward and the global state). For members ``i = 1..N``
with observations ``o_i``, actors ``mu_i`` and critics ``Q_i``::

    x        = (o_1, ..., o_N)        (critic_input "state_and_observations": (s, o_1..o_N))
    acting   a_i = mu_i(o_i) (+ exploration): each member from its OWN observation only
    target   y   = r + gamma^m (1 - d) Q'_i(x', mu'_1(o'_1), ..., mu'_N(o'_N))
    critic   L_i = mean((Q_i(x, a_1..a_N) - y)^2) / 2        (a_j: the replayed actions)
    actor    J_i = -mean(Q_i(x, a_1..mu_i(o_i)..a_N)) + actor_regularization * mean(out_i^2)

``r`` is the team reward (the sum of the members' rewards in the step: every member's critic
learns the team's return). Box members act in unit space ``u = tanh(out)`` (the critics see
unit actions; the env gets ``mid + half * u``), exploring with Gaussian noise. Discrete members
(MPE's default) act with the argmax of their logits (exploring: a sample of the softmax); their
critics see one-hot actions, and the actor's own action in ``J_i`` is a straight-through
Gumbel-softmax (:func:`gumbel_softmax`: one-hot forward, the relaxed softmax's gradient back).
The targets move by Polyak averaging with ``tau`` after each update. Actions in the action
mask's zeros are never taken (masked logits).

The actor's loss sees the critics through detached parameters, so one backward pass and one
Adam step (critics at ``lr``, actors at ``actor_lr``) train everything on the same batch.
Workers get the actors' weights only; an export holds one actor per member
(:meth:`MADDPGPolicy.export_agent_models`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from rlflow.algorithms.maddpg.actor import MemberActor, gumbel_noise, masked_logits
from rlflow.algorithms.maddpg.config import MADDPGConfig
from rlflow.algorithms.twin_q.policy import load_networks_state, networks_state, polyak_update
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    DISCOUNTS,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TD_ERROR,
    TERMINATEDS,
    VF_PREDS,
    WEIGHTS,
    SampleBatch,
)
from rlflow.envs.groups import TeamBox, TeamObs
from rlflow.errors import ConfigError
from rlflow.learner import PolicyUpdate
from rlflow.models import MLP
from rlflow.models.actors import ActorExport
from rlflow.models.memory import RecurrentInputs
from rlflow.policy.policy import TorchPolicy
from rlflow.replay import replay_transitions

__all__ = [
    "MADDPGModel",
    "MADDPGPolicy",
    "TeamSpec",
    "gumbel_softmax",
    "member_obs_sizes",
    "team_spec",
]

Array = npt.NDArray[Any]


def gumbel_softmax(logits: torch.Tensor, noise: torch.Tensor, temperature: float) -> torch.Tensor:
    """The straight-through Gumbel-softmax (Jang et al. 2017): the one-hot of ``argmax(logits +
    noise)`` in the forward pass, the gradient of ``softmax((logits + noise) / temperature)``
    in the backward pass. ``noise``: Gumbel draws of ``logits``' shape (:func:`gumbel_noise`).

    >>> logits = torch.tensor([[0.0, 2.0, 1.0]], requires_grad=True)
    >>> y = gumbel_softmax(logits, torch.zeros(1, 3), 1.0)
    >>> y.tolist()
    [[0.0, 1.0, 0.0]]
    >>> (y * torch.tensor([[1.0, 2.0, 3.0]])).sum().backward()
    >>> bool(logits.grad.abs().sum() > 0)
    True
    """
    soft = F.softmax((logits + noise) / temperature, dim=-1)
    hard = F.one_hot(soft.argmax(dim=-1), soft.shape[-1]).to(soft.dtype)
    return hard - soft.detach() + soft


def member_obs_sizes(space: TeamBox) -> list[int]:
    """Each member's own observation size (without the zero padding of the team's layout)."""
    return list(space.agent_obs_sizes)


class TeamSpec(NamedTuple):
    """A team's layout as MADDPG reads it (:func:`team_spec`)."""

    space: TeamBox
    """The team's observation space."""
    discrete: bool
    """Members act with Discrete actions (the team's MultiDiscrete); else Box ones."""
    action_sizes: list[int]
    """Per member: its number of actions (Discrete) or action values (Box)."""
    low: Array
    """The joint Box action's lower bounds (Discrete: empty)."""
    high: Array
    """The joint Box action's upper bounds (Discrete: empty)."""


def team_spec(
    owner: str, algo: str, observation_space: gym.Space[Any], action_space: gym.Space[Any]
) -> TeamSpec:
    """The team's layout, or a `ConfigError` naming the problem: ``observation_space`` is not a
    group's (`rlflow.envs.groups.TeamBox`), or the action space is not the members' Discrete
    actions (a MultiDiscrete) or their bounded Box actions side by side."""
    if not isinstance(observation_space, TeamBox):
        raise ConfigError(
            f"{owner}: observation_space={observation_space!r} is not a team's. {algo} needs a "
            'fixed set of agents acting together: set groups, e.g. groups: {"team": '
            '["agent_0", "agent_1"]} (the agents of a multi-agent env); a group '
            "(rlflow.envs.groups.TeamBox) guarantees a fixed member set, each member's own "
            "observation and the team's joint action"
        )
    sizes = list(observation_space.agent_action_sizes)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return TeamSpec(observation_space, True, sizes, np.zeros(0), np.zeros(0))
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        low = np.asarray(action_space.low, dtype=np.float32)
        high = np.asarray(action_space.high, dtype=np.float32)
        if np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and sum(sizes) == len(low):
            return TeamSpec(observation_space, False, sizes, low, high)
    raise ConfigError(
        f"{owner}: action_space={action_space!r} must be the team's members' Discrete actions "
        f"(a MultiDiscrete) or their Box actions with finite bounds, side by side, for {algo}"
    )


class MADDPGModel(nn.Module):
    """Per member: an actor ``o_i -> out_i`` and ``num_critics`` critics ``[x, a] -> Q``
    (``actors[i]``, ``critics[i][c]``)."""

    def __init__(
        self,
        obs_size: int,
        action_sizes: list[int],
        critic_in: int,
        *,
        hidden: tuple[int, ...],
        activation: str,
        num_critics: int,
    ) -> None:
        """Build ``len(action_sizes)`` actors and ``num_critics`` critics for each member."""
        super().__init__()
        self.actors = nn.ModuleList(
            MLP(obs_size, hidden, activation=activation, out_features=n) for n in action_sizes
        )
        self.critics = nn.ModuleList(
            nn.ModuleList(
                MLP(critic_in, hidden, activation=activation, out_features=1)
                for _ in range(num_critics)
            )
            for _ in action_sizes
        )

    def member_critics(self, i: int) -> nn.ModuleList:
        """Member ``i``'s critics."""
        critics: nn.ModuleList = self.critics[i]  # type: ignore[assignment]
        return critics

    def all_critics(self) -> list[nn.ModuleList]:
        """Every member's critics, in member order."""
        return [self.member_critics(i) for i in range(len(self.critics))]


class MADDPGPolicy(TorchPolicy):
    """MADDPG's policy for one group (module docstring).

    Reads `MADDPGConfig`'s ``lr`` (critics), ``actor_lr``, ``tau``, ``twin_q``, ``n_step``,
    ``gamma``, ``exploration_noise``, ``gumbel_temperature``, ``actor_regularization``,
    ``critic_input`` and ``model`` (``hidden``, ``activation``). Its observation space must be a
    group's (``groups``): a `ConfigError` otherwise, raised when the learner's worker builds it,
    before any actor starts.
    """

    config: MADDPGConfig
    config_class: ClassVar[type[AlgorithmConfig]] = MADDPGConfig
    observation_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Box,)
    action_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.MultiDiscrete, gym.spaces.Box)
    requires_next_obs: ClassVar[bool] = True

    algo_name: ClassVar[str] = "MADDPG"
    """The algorithm, for error messages."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: MADDPGConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Check the spaces (a group's), build the networks and their targets."""
        self.team = team_spec(type(self).__name__, self.algo_name, observation_space, action_space)
        """The team's layout."""
        if config.observation_filter != "NoFilter" and self.team.space.agent_mask_size:
            raise ConfigError(
                f"{type(self).__name__}: observation_filter={config.observation_filter!r} would "
                "normalize the members' action masks (0/1 values in the team's observations); "
                "use observation_filter='NoFilter' with masked members"
            )
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        self._mid = torch.as_tensor((self.team.high + self.team.low) / 2.0, device=self.device)
        self._half = torch.as_tensor((self.team.high - self.team.low) / 2.0, device=self.device)
        self.target_model: MADDPGModel = copy.deepcopy(self.net).requires_grad_(False)
        """Polyak-averaged copy of :attr:`net`, moved by :meth:`update_target`."""

    @property
    def net(self) -> MADDPGModel:
        """The online networks (``self.model``, typed)."""
        model: MADDPGModel = self.model  # type: ignore[assignment]
        return model

    @property
    def num_agents(self) -> int:
        """The team's members."""
        return self.team.space.num_agents

    def critic_input_size(self) -> int:
        """Values a critic reads: every member's (padded) observation, the state with
        ``critic_input="state_and_observations"``, and every member's action."""
        space = self.team.space
        size = space.num_agents * space.agent_obs_size + sum(self.team.action_sizes)
        if self.config.critic_input == "state_and_observations":
            size += space.state_size
        return size

    def make_model(self) -> nn.Module:
        """The `MADDPGModel` shaped by ``hidden`` and ``activation``."""
        model_cfg = self.config.model
        return MADDPGModel(
            self.team.space.agent_obs_size,
            self.team.action_sizes,
            self.critic_input_size(),
            hidden=model_cfg.hidden,
            activation=model_cfg.activation,
            num_critics=2 if self.config.twin_q else 1,
        )

    def make_update(self) -> PolicyUpdate:
        """One Adam step trains the critics (at ``lr``) and the actors (at ``actor_lr``) on the
        same batch; a part the loss does not reach (MATD3's actors between delayed updates) is
        left alone."""
        groups: list[dict[str, Any]] = [
            {"params": list(self.net.critics.parameters())},
            {"params": list(self.net.actors.parameters()), "lr": self.config.actor_lr},
        ]
        params = [p for p in self.model.parameters() if p.requires_grad]
        return PolicyUpdate(self, params, param_groups=groups, skip_unreached=True)

    # -- the team's layout ------------------------------------------------------------------

    def split(self, obs: torch.Tensor) -> TeamObs:
        """Team observations ``[B, team_size]`` -> members' ``[B, N, d]``, masks, state."""
        return self.team.space.split(obs.reshape(obs.shape[0], -1).float())

    def actor_outputs(self, model: MADDPGModel, team: TeamObs) -> list[torch.Tensor]:
        """Each member's actor on its own observation: ``[B, a_i]`` (logits masked by the
        member's action mask, or pre-tanh values)."""
        outs = []
        for i, actor in enumerate(model.actors):
            out = actor(team.agents[:, i])
            if self.team.discrete:
                out = masked_logits(out, None if team.masks is None else team.masks[:, i])
            outs.append(out)
        return outs

    def critic_actions(self, actions: torch.Tensor) -> list[torch.Tensor]:
        """Replayed joint env actions -> each member's action as its critic reads it: one-hot
        ``[B, n_i]`` (Discrete) or unit ``[B, a_i]`` in [-1, 1] (Box)."""
        if self.team.discrete:
            return [
                F.one_hot(actions[:, i].long(), n).float()
                for i, n in enumerate(self.team.action_sizes)
            ]
        unit = (actions.float() - self._mid) / self._half
        return list(torch.split(unit, self.team.action_sizes, dim=1))

    def critic_x(self, team: TeamObs, actions: list[torch.Tensor]) -> torch.Tensor:
        """A critic's input ``[B, critic_input_size]``: the members' observations (and the
        state), then every member's action."""
        parts = [team.agents.reshape(team.agents.shape[0], -1)]
        if self.config.critic_input == "state_and_observations":
            parts.append(team.state)
        return torch.cat([*parts, *actions], dim=1)

    # -- acting -----------------------------------------------------------------------------

    def rand_gumbel(self, shape: tuple[int, ...]) -> torch.Tensor:
        """Gumbel noise from the policy's generator (kept in checkpoints), on its device."""
        return gumbel_noise(shape, self.generator).to(self.device)

    def randn(self, shape: tuple[int, ...]) -> torch.Tensor:
        """Standard normal noise from the policy's generator, on its device."""
        return torch.randn(shape, generator=self.generator).to(self.device)

    def compute_actions(
        self, obs: npt.ArrayLike, *, explore: bool = True, memory: RecurrentInputs | None = None
    ) -> tuple[Array, dict[str, Array]]:
        """Joint actions ``[B, N]`` (Discrete members) or ``[B, sum a_i]`` (Box), each member's
        from its own observation (module docstring). Extra columns: `ACTION_DIST_INPUTS` = the
        actors' outputs side by side, `LOGP` = `VF_PREDS` = 0."""
        with torch.no_grad():
            outs = self.actor_outputs(self.net, self.split(self.obs_to_tensor(obs)))
            if self.team.discrete:
                picks = [
                    (out + self.rand_gumbel(tuple(out.shape)) if explore else out).argmax(dim=1)
                    for out in outs
                ]
                actions = torch.stack(picks, dim=1).cpu().numpy()
            else:
                unit = torch.tanh(torch.cat(outs, dim=1))
                scale = self.config.exploration_noise
                if explore and scale > 0:
                    unit = (unit + scale * self.randn(tuple(unit.shape))).clamp(-1.0, 1.0)
                actions = (self._mid + self._half * unit).cpu().numpy()
            inputs = torch.cat(outs, dim=1).cpu().numpy()
        zeros = np.zeros(len(actions), dtype=np.float32)
        return actions, {LOGP: zeros, VF_PREDS: zeros.copy(), ACTION_DIST_INPUTS: inputs}

    def value(self, obs: npt.ArrayLike, *, memory: RecurrentInputs | None = None) -> Array:
        """The first member's critic at the greedy joint action, ``[B]``, without gradients."""
        with torch.no_grad():
            team = self.split(self.obs_to_tensor(obs))
            outs = self.actor_outputs(self.net, team)
            x = self.critic_x(team, self.greedy_actions(outs))
            values: Array = self.net.member_critics(0)[0](x).squeeze(1).cpu().numpy()
        return values

    # -- learning ---------------------------------------------------------------------------

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """n-step transitions of one episode fragment (`rlflow.replay.replay_transitions`)."""
        config = self.config
        return replay_transitions(
            batch, n=config.n_step, gamma=config.gamma, owner=type(self).__name__
        )

    def greedy_actions(self, outs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Actors' outputs -> their greedy actions as critics read them (one-hot argmax, or
        ``tanh``)."""
        if self.team.discrete:
            return [F.one_hot(out.argmax(dim=1), out.shape[1]).float() for out in outs]
        return [torch.tanh(out) for out in outs]

    def target_actions(self, next_team: TeamObs) -> list[torch.Tensor]:
        """The target actors' actions at the next observations, as critics read them (MADDPG:
        greedy; MATD3 smooths them)."""
        return self.greedy_actions(self.actor_outputs(self.target_model, next_team))

    def policy_action(self, out: torch.Tensor) -> torch.Tensor:
        """A member's differentiable action from its actor's output: the straight-through
        Gumbel-softmax (Discrete, ``gumbel_temperature``) or ``tanh`` (Box)."""
        if self.team.discrete:
            noise = self.rand_gumbel(tuple(out.shape))
            return gumbel_softmax(out, noise, self.config.gumbel_temperature)
        return torch.tanh(out)

    def critic_detached(self, i: int, x: torch.Tensor) -> torch.Tensor:
        """Member ``i``'s first critic at ``x`` ``[B]`` with its parameters detached: gradients
        reach the actions in ``x`` (the actor) but not the critic."""
        critic = self.net.member_critics(i)[0]
        params = {k: v.detach() for k, v in critic.named_parameters()}
        out: torch.Tensor = functional_call(critic, params, (x,))
        return out.squeeze(1)

    def updates_actor(self) -> bool:
        """Whether the next update trains the actors (MADDPG: every one)."""
        return True

    def actor_loss(
        self, team: TeamObs, actions: list[torch.Tensor]
    ) -> tuple[torch.Tensor | None, dict[str, Any]]:
        """``sum_i J_i`` (module docstring), or None in an update that leaves the actors
        alone."""
        if not self.updates_actor():
            return None, {}
        outs = self.actor_outputs(self.net, team)
        total = torch.zeros((), device=self.device)
        reg = self.config.actor_regularization
        for i, out in enumerate(outs):
            joint = [*actions[:i], self.policy_action(out), *actions[i + 1 :]]
            q = self.critic_detached(i, self.critic_x(team, joint))
            total = total - q.mean()
            if reg > 0:
                raw = self.net.actors[i](team.agents[:, i])  # unmasked: the -1e9 stay out
                total = total + reg * raw.pow(2).mean()
        return total, {"actor_loss": total}

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """The critics' TD losses plus the actors' (module docstring); records the TD errors
        (mean |td| over members and critics) for prioritized replay."""
        t = batch_tensors
        team, next_team = self.split(t[OBS]), self.split(t[NEXT_OBS])
        actions = self.critic_actions(t[ACTIONS])
        with torch.no_grad():
            next_x = self.critic_x(next_team, self.target_actions(next_team))
            not_done = 1.0 - t[TERMINATEDS].float()
            bootstrap = t[DISCOUNTS] * not_done
            targets = [
                t[REWARDS]
                + bootstrap * torch.stack([c(next_x).squeeze(1) for c in critics]).min(dim=0).values
                for critics in self.target_model.all_critics()
            ]
        x = self.critic_x(team, actions)
        pairs = [(c, targets[i]) for i, cs in enumerate(self.net.all_critics()) for c in cs]
        q = torch.stack([critic(x).squeeze(1) for critic, _ in pairs])  # [N * critics, B]
        tds = q - torch.stack([target for _, target in pairs])
        per_row = 0.5 * tds.pow(2).sum(dim=0)
        weights = t.get(WEIGHTS)
        critic_loss = (per_row if weights is None else per_row * weights.float()).mean()
        actor_loss, stats = self.actor_loss(team, actions)
        total = critic_loss if actor_loss is None else critic_loss + actor_loss
        return total, {
            **stats,
            "critic_loss": critic_loss,
            "mean_q": q.mean(),
            TD_ERROR: tds.abs().mean(dim=0),
        }

    def update_target(self) -> None:
        """Polyak-average the online networks into the targets with ``tau``."""
        polyak_update(self.target_model, self.net, self.config.tau)

    # -- export -----------------------------------------------------------------------------

    def agent_spaces(self) -> dict[Any, tuple[gym.spaces.Box, gym.Space[Any]]]:
        """Per member: the observation space its exported actor takes (its own flat
        observation, and its action mask if it has one) and its action space."""
        space, team = self.team.space, self.team
        sizes = member_obs_sizes(space)
        per = space.agent_obs_size + space.agent_mask_size
        out: dict[Any, tuple[gym.spaces.Box, gym.Space[Any]]] = {}
        offset = 0
        for i, agent in enumerate(space.agent_ids):
            start = i * per
            idx = np.r_[start : start + sizes[i], start + space.agent_obs_size : start + per]
            obs_space = gym.spaces.Box(space.low[idx], space.high[idx], dtype=np.float32)
            n = team.action_sizes[i]
            act: gym.Space[Any]
            if team.discrete:
                act = gym.spaces.Discrete(n)
            else:
                act = gym.spaces.Box(
                    team.low[offset : offset + n], team.high[offset : offset + n], dtype=np.float32
                )
                offset += n
            out[agent] = (obs_space, act)
        return out

    def export_agent_models(self) -> dict[Any, ActorExport]:
        """One `MemberActor` per member (its actor only: no critic, no other member's input, no
        state), acting from the member's own observation (:meth:`agent_spaces`)."""
        space, model_cfg = self.team.space, self.config.model
        sizes = member_obs_sizes(space)
        exports = {}
        for i, (agent, (_, act)) in enumerate(self.agent_spaces().items()):
            options: dict[str, Any] = {
                "obs_size": sizes[i],
                "padded_size": space.agent_obs_size,
                "mask_size": space.agent_mask_size,
                "hidden": list(model_cfg.hidden),
                "activation": model_cfg.activation,
                "discrete": self.team.discrete,
            }
            if self.team.discrete:
                options["num_actions"] = int(act.n)  # type: ignore[attr-defined]
            else:
                options["low"] = [float(v) for v in act.low]  # type: ignore[attr-defined]
                options["high"] = [float(v) for v in act.high]  # type: ignore[attr-defined]
                options["noise"] = float(self.config.exploration_noise)
            actor = self.net.actors[i]
            weights = {k: v.detach().cpu().numpy().copy() for k, v in actor.state_dict().items()}
            exports[agent] = ActorExport(MemberActor, options, weights)
        return exports

    def export_model(self) -> ActorExport:
        """Refused: a team policy exports one actor per member (:meth:`export_agent_models`)."""
        raise ConfigError(
            f"{type(self).__name__}: a team policy exports one actor per member "
            "(export_agent_models()), not one model for the team"
        )

    # -- state ------------------------------------------------------------------------------

    @property
    def weights_module(self) -> nn.Module:
        """The actors: their weights are all a rollout worker needs (`get_weights`)."""
        return self.net.actors

    def get_state(self) -> dict[str, Any]:
        """The base snapshot plus every network (the critics) and the targets."""
        return {**super().get_state(), **networks_state(self.net, self.target_model)}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`."""
        super().set_state(state)
        load_networks_state(self.net, self.target_model, state)

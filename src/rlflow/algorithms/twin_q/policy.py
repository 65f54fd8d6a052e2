"""`TwinQPolicy`: what SAC's and TD3's policies share: an actor, (twin) Q critics, Polyak targets.

Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic Methods" (TD3, ICML
2018) and Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (2018). Actions live
in the Box's bounds; the networks see them in unit form ``u = (a - mid) / half`` in [-1, 1]
(``mid``, ``half``: the Box's centre and half-range), so one actor head ``tanh`` fits any Box.
For a replayed n-step transition ``(s, a, R, s', d, gamma^m)`` and critics ``Q_1, Q_2``::

    target  = R + gamma^m * (1 - d) * next_value(s')         (the subclass: SAC's soft value,
                                                               TD3's smoothed target actor)
    td_i    = Q_i(s, a) - target
    loss    = mean(w * sum_i td_i^2 / 2) + actor_loss + extra  (w: PER weights, else 1)

The actor's loss sees the critics through detached parameters (:meth:`TwinQPolicy.q_detached`),
so one backward pass and one Adam step (a parameter group per part, each with its own learning
rate) train every part on the same batch, as RLlib's torch SAC does with three optimizers. A
part with no gradient in a step (TD3's actor between delayed updates) is left alone by Adam.

The subclasses live with their algorithms (`rlflow.algorithms.sac.policy.SACPolicy`,
`rlflow.algorithms.td3.policy.TD3Policy`) and write :meth:`TwinQPolicy.compute_actions`,
:meth:`TwinQPolicy.next_value` and :meth:`TwinQPolicy.actor_loss` (and postprocessing, which
needs `rlflow.replay`, a layer above this one). Workers get the actor's weights only
(:meth:`TwinQPolicy.get_weights`); :meth:`TwinQPolicy.get_state` holds every network, the
targets and the optimizer.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from torch.func import functional_call

from rlflow.algorithms.twin_q.config import TwinQConfig
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import (
    ACTIONS,
    DISCOUNTS,
    NEXT_OBS,
    OBS,
    REWARDS,
    TD_ERROR,
    TERMINATEDS,
    WEIGHTS,
)
from rlflow.errors import ConfigError
from rlflow.learner import PolicyUpdate
from rlflow.models import MLP
from rlflow.models.memory import RecurrentInputs
from rlflow.policy.policy import TorchPolicy
from rlflow.policy.spaces import check_policy_spaces

__all__ = ["TwinQModel", "TwinQPolicy", "polyak_update"]

Array = npt.NDArray[Any]


class TwinQModel(nn.Module):
    """The actor ``obs -> actor_out`` and one or two critics ``[obs, unit action] -> Q``.

    ``log_alpha`` (SAC's entropy temperature) is a parameter when ``initial_alpha`` is given.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        actor_out: int,
        *,
        hidden: tuple[int, ...],
        activation: str,
        twin_q: bool,
        initial_alpha: float | None = None,
    ) -> None:
        """Build the actor, ``2 if twin_q else 1`` critics and, maybe, ``log_alpha``."""
        super().__init__()
        self.actor = MLP(obs_dim, hidden, activation=activation, out_features=actor_out)
        self.critics = nn.ModuleList(
            MLP(obs_dim + act_dim, hidden, activation=activation, out_features=1)
            for _ in range(2 if twin_q else 1)
        )
        self.log_alpha = (
            None
            if initial_alpha is None
            else nn.Parameter(torch.tensor(float(np.log(initial_alpha))))
        )


def polyak_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """``target <- tau * source + (1 - tau) * target``, parameter by parameter, in place.

    >>> a, b = nn.Linear(1, 1), nn.Linear(1, 1)
    >>> _ = [p.data.fill_(1.0) for p in a.parameters()]
    >>> _ = [p.data.fill_(0.0) for p in b.parameters()]
    >>> polyak_update(b, a, 0.25); [p.item() for p in b.parameters()]
    [0.25, 0.25]
    """
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters(), strict=True):
            t.mul_(1.0 - tau).add_(s, alpha=tau)


def networks_state(net: nn.Module, target: nn.Module) -> dict[str, dict[str, Array]]:
    """A snapshot of an online network and its target as numpy arrays: ``{"model": ...,
    "target": ...}`` (what `load_networks_state` restores; a policy's `get_state` adds it)."""

    def numpy_state(module: nn.Module) -> dict[str, Array]:
        return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}

    return {"model": numpy_state(net), "target": numpy_state(target)}


def load_networks_state(net: nn.Module, target: nn.Module, state: Mapping[str, Any]) -> None:
    """Load ``state``'s ``"model"`` and ``"target"`` (from `networks_state`) into ``net`` and
    ``target``."""
    for module, key in ((net, "model"), (target, "target")):
        module.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in state[key].items()})


def _check_box(space: gym.Space[Any], what: str, owner: str, algo: str, *, bounded: bool) -> None:
    """`ConfigError` unless ``space`` is a 1-D Box (with finite bounds if ``bounded``)."""
    ok = isinstance(space, gym.spaces.Box) and len(space.shape) == 1
    if ok and bounded:
        ok = bool(np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)))  # type: ignore[attr-defined]
    if not ok:
        rule = "a 1-D Box with finite bounds" if bounded else "a 1-D Box"
        raise ConfigError(f"{owner}: {what}={space!r} must be {rule} for {algo}.")


class TwinQPolicy(TorchPolicy):
    """Base of SAC's and TD3's policies (see the module docstring).

    Reads `TwinQConfig`'s ``lr`` (critics), ``actor_lr``, ``tau``, ``twin_q``, ``n_step`` and
    ``model`` (``hidden`` default (256, 256), ``activation`` "relu"), besides the shared
    settings. The loss's stats hold `TD_ERROR` (mean |td| over the critics; with a replayed
    batch's `BATCH_INDEXES`, `PolicyUpdate.learn_on_batch`), for priority updates;
    :meth:`update_target` Polyak-averages the targets with ``tau``.
    """

    config: TwinQConfig
    config_class: ClassVar[type[AlgorithmConfig]] = TwinQConfig
    observation_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Box,)
    action_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Box,)
    requires_next_obs: ClassVar[bool] = True

    algo_name: ClassVar[str] = "SAC or TD3"
    """The algorithm, for error messages."""

    actor_out_factor: ClassVar[int] = 1
    """The actor's outputs per action dimension (SAC: 2, mean and log-std)."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: TwinQConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Check the spaces (1-D Box actions with finite bounds), build the networks."""
        name = type(self).__name__
        check_policy_spaces(type(self), observation_space, action_space)
        _check_box(action_space, "action_space", name, self.algo_name, bounded=True)
        _check_box(observation_space, "observation_space", name, self.algo_name, bounded=False)
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        low = np.asarray(action_space.low, dtype=np.float32)  # type: ignore[attr-defined]
        high = np.asarray(action_space.high, dtype=np.float32)  # type: ignore[attr-defined]
        self._mid = torch.as_tensor((high + low) / 2.0, device=self.device)
        self._half = torch.as_tensor((high - low) / 2.0, device=self.device)
        self.target_model: TwinQModel = copy.deepcopy(self.net).requires_grad_(False)
        """Polyak-averaged copy of :attr:`net`, moved by :meth:`update_target`."""

    @property
    def net(self) -> TwinQModel:
        """The online networks (``self.model``, typed)."""
        model: TwinQModel = self.model  # type: ignore[assignment]
        return model

    @property
    def act_dim(self) -> int:
        """The action's dimensions."""
        return int(self.action_space.shape[0])  # type: ignore[index]

    def initial_alpha(self) -> float | None:
        """SAC's initial entropy temperature (``log_alpha`` a parameter of the model), or None
        (no ``log_alpha``)."""
        return None

    def make_model(self) -> nn.Module:
        """The `TwinQModel`: the actor, ``2 if twin_q else 1`` critics and, maybe, ``log_alpha``,
        shaped by ``hidden`` and ``activation``."""
        model_cfg = self.config.model
        obs_dim = int(np.prod(self.observation_space.shape or (1,)))
        return TwinQModel(
            obs_dim,
            self.act_dim,
            self.actor_out_factor * self.act_dim,
            hidden=model_cfg.hidden,
            activation=model_cfg.activation,
            twin_q=self.config.twin_q,
            initial_alpha=self.initial_alpha(),
        )

    def param_groups(self) -> list[dict[str, Any]]:
        """The optimizer's groups: the critics at ``lr``, the actor at ``actor_lr`` (SAC adds
        alpha)."""
        return [
            {"params": list(self.net.critics.parameters())},  # at the update's lr
            {"params": list(self.net.actor.parameters()), "lr": self.config.actor_lr},
        ]

    def make_update(self) -> PolicyUpdate:
        """One step trains every part on the same batch, each part in its own parameter group
        (:meth:`param_groups`); a part the loss does not reach in a step (TD3's actor between
        delayed updates) is left alone."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        return PolicyUpdate(self, params, param_groups=self.param_groups(), skip_unreached=True)

    # -- actions ----------------------------------------------------------------------------

    def to_env(self, unit: torch.Tensor) -> torch.Tensor:
        """Unit actions in [-1, 1] -> the Box's bounds."""
        return self._mid + self._half * unit

    def to_unit(self, action: torch.Tensor) -> torch.Tensor:
        """Env actions in the Box's bounds -> [-1, 1]."""
        return (action - self._mid) / self._half

    def randn(self, shape: tuple[int, ...]) -> torch.Tensor:
        """Standard normal noise from the policy's generator (kept in checkpoints). In a
        data-parallel step (``shard_span``) the noise of every row of the step is drawn and this
        learner's rows are kept: the same noise, and the same generator state, as one learner."""
        span = self.update.shard_span
        if span is not None and shape and shape[0] == span[1] - span[0]:
            start, end, rows = span
            full = torch.randn((rows, *shape[1:]), generator=self.generator)
            return full[start:end].to(self.device)
        return torch.randn(shape, generator=self.generator).to(self.device)

    def flat_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, *obs_shape]`` -> float ``[B, obs_dim]``."""
        return obs.reshape(obs.shape[0], -1).float()

    def q_values(self, model: TwinQModel, obs: torch.Tensor, unit: torch.Tensor) -> torch.Tensor:
        """``[num_critics, B]``: each critic of ``model`` at flat ``obs`` and ``unit`` actions."""
        x = torch.cat([obs, unit], dim=1)
        return torch.stack([critic(x).squeeze(1) for critic in model.critics])

    def critic_detached(self, index: int, obs: torch.Tensor, unit: torch.Tensor) -> torch.Tensor:
        """``Q_index(obs, unit)`` ``[B]`` with the critic's parameters detached: gradients reach
        ``unit`` (the actor) but not the critic."""
        critic = self.net.critics[index]
        params = {k: v.detach() for k, v in critic.named_parameters()}
        out: torch.Tensor = functional_call(critic, params, (torch.cat([obs, unit], dim=1),))
        return out.squeeze(1)

    def q_detached(self, obs: torch.Tensor, unit: torch.Tensor) -> torch.Tensor:
        """``min_i Q_i(obs, unit)`` ``[B]`` through :meth:`critic_detached`."""
        values = [self.critic_detached(i, obs, unit) for i in range(len(self.net.critics))]
        return torch.stack(values).min(dim=0).values

    def value(self, obs: npt.ArrayLike, *, memory: RecurrentInputs | None = None) -> Array:
        """``min_i Q_i(s, greedy action)`` ``[B]``, without gradients."""
        flat = self.flat_obs(self.obs_to_tensor(obs))
        with torch.no_grad():
            unit = self.to_unit(torch.as_tensor(self.compute_actions(obs, explore=False)[0]))
            q = self.q_values(self.net, flat, unit.to(self.device)).min(dim=0).values
        return q.cpu().numpy()

    # -- learning ---------------------------------------------------------------------------

    @abc.abstractmethod
    def next_value(self, next_obs: torch.Tensor) -> torch.Tensor:
        """The bootstrap value ``[B]`` at flat next observations (called without gradients)."""

    @abc.abstractmethod
    def actor_loss(self, obs: torch.Tensor) -> tuple[torch.Tensor | None, dict[str, Any]]:
        """The actor's loss (and extras, e.g. SAC's alpha loss) on flat observations, or None
        in a step that leaves the actor alone; and its stats."""

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Critic loss plus the actor's (module docstring); records the TD errors."""
        t = batch_tensors
        obs, next_obs = self.flat_obs(t[OBS]), self.flat_obs(t[NEXT_OBS])
        with torch.no_grad():
            not_done = 1.0 - t[TERMINATEDS].float()
            target = t[REWARDS] + t[DISCOUNTS] * not_done * self.next_value(next_obs)
        q = self.q_values(self.net, obs, self.to_unit(t[ACTIONS].float()))
        td = q - target
        weights = t.get(WEIGHTS)
        per_row = 0.5 * td.pow(2).sum(dim=0)
        critic_loss = (per_row if weights is None else per_row * weights.float()).mean()
        actor_loss, stats = self.actor_loss(obs)
        total = critic_loss if actor_loss is None else critic_loss + actor_loss
        stats = {
            **stats,
            "critic_loss": critic_loss,
            "mean_q": q.mean(),
            TD_ERROR: td.abs().mean(dim=0),
        }
        return total, stats

    def update_target(self) -> None:
        """Polyak-average the online networks into the targets with ``tau``."""
        polyak_update(self.target_model, self.net, self.config.tau)

    # -- state ------------------------------------------------------------------------------

    @property
    def weights_module(self) -> nn.Module:
        """The actor: its weights are all a rollout worker needs (`get_weights`)."""
        return self.net.actor

    def get_state(self) -> dict[str, Any]:
        """The base snapshot plus every network (critics, ``log_alpha``) and the targets."""
        return {**super().get_state(), **networks_state(self.net, self.target_model)}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`."""
        super().set_state(state)
        load_networks_state(self.net, self.target_model, state)

"""DQN's networks: `QNetwork` (the Q-values of every action, the policy's online and target
networks) and `QActor`, the Q network as an exportable actor (`rlflow.models.actors`): what
`DQNPolicy.export_model` exports and `rlflow.load_policy` rebuilds."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlflow.errors import ConfigError
from rlflow.models import MLP, NatureCNN
from rlflow.models.actors import ExportableActor

__all__ = ["QActor", "QNetwork"]


class QNetwork(nn.Module):
    """Q-values of every action: ``forward(obs) -> [B, num_actions]``.

    An MLP (or the Nature CNN for image observations) and a linear head; with ``dueling``,
    a value and an advantage head combined as ``V + A - mean(A)``.
    """

    def __init__(
        self,
        obs_space: gym.Space[Any],
        num_actions: int,
        *,
        hidden: tuple[int, ...],
        activation: str,
        dueling: bool,
    ) -> None:
        """Build the layers; raise `ConfigError` for an observation space other than Box."""
        super().__init__()
        if not isinstance(obs_space, gym.spaces.Box):
            raise ConfigError(f"DQNPolicy takes Box observations, got {obs_space!r}")
        self.is_image = len(obs_space.shape) == 3
        self.trunk: nn.Module
        if self.is_image:
            self.trunk, width = NatureCNN(tuple(obs_space.shape)), 512
        else:
            mlp = MLP(int(np.prod(obs_space.shape)), hidden, activation=activation)
            self.trunk, width = mlp, mlp.out_features
        self.dueling = dueling
        self.advantage = nn.Linear(width, num_actions)
        self.value = nn.Linear(width, 1) if dueling else None

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Return Q-values ``[B, num_actions]`` for raw observations ``[B, *obs_shape]``."""
        x = obs if self.is_image else obs.reshape(obs.shape[0], -1).float()
        features = self.trunk(x)
        adv: torch.Tensor = self.advantage(features)
        if self.value is None:
            return adv
        value: torch.Tensor = self.value(features)
        return value + adv - adv.mean(dim=1, keepdim=True)


class QActor(QNetwork, ExportableActor):
    """DQN's Q network acting on its own (what `DQNPolicy.export_model` exports): the greedy
    action ``argmax_a Q(s, a)``; exploring, a uniform random action with probability
    ``epsilon`` (the policy's ``final_epsilon``)."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        hidden: tuple[int, ...] = (64, 64),
        activation: str = "relu",
        dueling: bool = False,
        epsilon: float = 0.0,
    ) -> None:
        """Build the Q network for ``action_space`` (Discrete); weights are loaded afterwards."""
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ConfigError(f"QActor: action_space={action_space!r} must be Discrete")
        hidden = tuple(int(h) for h in hidden)
        n = int(action_space.n)
        super().__init__(
            observation_space, n, hidden=hidden, activation=activation, dueling=dueling
        )
        self.num_actions, self.epsilon = n, float(epsilon)

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The Q-values."""
        q: torch.Tensor = self.forward(obs)
        return q

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """Greedy actions, or epsilon-greedy ones drawn with ``generator`` when exploring."""
        actions = self.forward(obs).cpu().argmax(dim=1)
        if not explore:
            return actions
        size = actions.shape[0]
        random_actions = torch.randint(
            self.num_actions, (size,), generator=generator, dtype=actions.dtype
        )
        mask = torch.rand(size, generator=generator) < self.epsilon
        return torch.where(mask, random_actions, actions)

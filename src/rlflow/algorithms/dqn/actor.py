"""`QActor`: DQN's Q network as an exportable actor (`rlflow.models.actors`), the network
`DQNPolicy.export_model` exports and `rlflow.load_policy` rebuilds."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from rlflow.algorithms.dqn.policy import QNetwork
from rlflow.errors import ConfigError
from rlflow.models.actors import ExportableActor

__all__ = ["QActor"]


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

"""`QMIXAgentActor`: one member of a QMIX (VDN) team, exported to act on its own.

Decentralized execution: the member acts from its own observation (and its action mask, when
the env gives one) and its own GRU state, with no mixer, no global state and no other
member's observation. A shared network has the member's one-hot id baked in (the loaded
policy is given the observation alone); the observation is zero-padded to the team's widest,
as in training. Greedy actions are the argmax of its legal Q-values; exploring is
epsilon-greedy over the legal actions.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
import torch.nn.functional as F

from rlflow.algorithms.qmix.model import agent_network
from rlflow.models.masking import MASKED_LOGIT
from rlflow.models.recurrent import StatefulActor

__all__ = ["QMIXAgentActor"]


class QMIXAgentActor(StatefulActor):
    """A member's recurrent Q network acting from its own observation (module docstring).

    Args:
        observation_space: the member's own flat observation space (observation, then its
            action mask when it has one).
        action_space: the member's ``Discrete`` action space.
        obs_size: values of the member's observation (before its mask).
        padded_size: the team's observation width the network reads (zero padding).
        mask_size: values of its action mask (0: none).
        agent_index: the member's index in its team (its one-hot id's position).
        id_size: the one-hot id's size (0: the network reads no id).
        num_q: the network's Q-values (the team's largest action count).
        hidden: the network's layers before the GRU.
        activation: their activation.
        cell_size: the GRU's units.
        epsilon: the exploration rate of ``explore=True``.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        obs_size: int,
        padded_size: int,
        mask_size: int,
        agent_index: int,
        id_size: int,
        num_q: int,
        hidden: list[int],
        activation: str,
        cell_size: int,
        epsilon: float = 0.0,
    ) -> None:
        """Build the member's network (weights are loaded afterwards)."""
        super().__init__()
        self.net = agent_network(
            padded_size + id_size, num_q, hidden=hidden, activation=activation, cell_size=cell_size
        )
        self.obs_size = int(obs_size)
        self.mask_size = int(mask_size)
        self.pad = int(padded_size) + int(id_size) - int(obs_size)
        self.num_actions = int(action_space.n)  # type: ignore[attr-defined]
        self.num_q = int(num_q)
        self.cell_size = int(cell_size)
        self.epsilon = float(epsilon)
        one_hot = torch.zeros(int(padded_size) + int(id_size))
        if id_size:
            one_hot[int(padded_size) + int(agent_index)] = 1.0
        self.register_buffer("agent_id", one_hot, persistent=False)

    def initial_state(self, batch_size: int) -> list[torch.Tensor]:
        """Zeros ``[batch_size, cell_size]``: the GRU's state at an episode's start."""
        return [torch.zeros(batch_size, self.cell_size)]

    def network_step(self, *inputs: Any) -> tuple[torch.Tensor, torch.Tensor, list[Any]]:
        """``(Q-values [B, 1, num_actions] (illegal at MASKED_LOGIT), zeros, state)`` for the
        member's observations ``[B, 1, obs_size + mask_size]`` and its state."""
        obs, state = inputs[0], inputs[1]
        own = obs[..., : self.obs_size].float()
        agent_id: torch.Tensor = self.agent_id  # type: ignore[assignment]
        x = F.pad(own, (0, self.pad)) + agent_id
        q, values, after = self.net(x, list(state))
        q = q[..., : self.num_actions]
        if self.mask_size:
            mask = obs[..., self.obs_size : self.obs_size + self.num_actions] > 0.5
            q = torch.where(mask, q, torch.full_like(q, MASKED_LOGIT))
        return q, values, list(after)

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor | None:
        """None: the Q-values come with the state (`network_step`)."""
        return None

    def choose(
        self, dist_inputs: torch.Tensor, *, explore: bool, generator: torch.Generator
    ) -> torch.Tensor:
        """The argmax of the legal Q-values; with ``explore``, a uniform legal action with
        probability ``epsilon``."""
        greedy = dist_inputs.argmax(dim=-1)
        if not explore:
            return greedy
        legal = (dist_inputs > MASKED_LOGIT / 2).float()
        random = torch.multinomial(legal, 1, generator=generator)[:, 0]
        draw = torch.rand(greedy.shape[0], generator=generator) < self.epsilon
        return torch.where(draw, random, greedy)

"""AlphaZero's network: a policy head and a value head over the board, and its exported actor.

:class:`AlphaZeroNet` takes flat observations with the action mask last
(`rlflow.envs.flatten.ActionMaskBox`), runs an MLP trunk (``model.hidden``,
``model.activation``) on the board without the mask, and returns the policy's logits (illegal
actions at `rlflow.models.masking.MASKED_LOGIT`) and a value in ``[-1, 1]`` (tanh): the expected
outcome for the player to move. :class:`AlphaZeroActor` is the same network exported
(`rlflow.export`): ``rlflow.load_policy(path)`` acts with its priors alone (the most probable
legal move), or with a search when given the game (``num_simulations`` and ``env``:
:meth:`AlphaZeroActor.search`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rlflow.algorithms.alpha_zero.game import GameStep, TurnGame, copy_game
from rlflow.algorithms.alpha_zero.search import Node, run_search, select_action
from rlflow.errors import ConfigError
from rlflow.models.actors import ExportableActor
from rlflow.models.masking import MASKED_LOGIT
from rlflow.models.nets import MLP

__all__ = ["AlphaZeroActor", "AlphaZeroNet", "network_evaluator"]

Array = npt.NDArray[Any]


class AlphaZeroNet(nn.Module):
    """Policy logits and value over a board (module docstring).

    Args:
        obs_size: the flat observation's size, mask included.
        num_actions: the actions (the mask's size).
        hidden: the trunk's layer widths (at least one).
        activation: the trunk's activation (`rlflow.models.nets.ACTIVATIONS`).
    """

    def __init__(
        self, obs_size: int, num_actions: int, hidden: tuple[int, ...], activation: str
    ) -> None:
        """Build the trunk and the two heads."""
        super().__init__()
        if not hidden:
            raise ConfigError("AlphaZero's model.hidden must have at least one layer")
        self.num_actions = int(num_actions)
        self.trunk = MLP(obs_size - self.num_actions, tuple(hidden), activation=activation)
        self.policy_head = nn.Linear(int(hidden[-1]), self.num_actions)
        self.value_head = nn.Linear(int(hidden[-1]), 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(masked logits [B, A], values [B])`` of observations ``[B, obs_size]``."""
        board, legal = obs[..., : -self.num_actions], obs[..., -self.num_actions :] > 0.5
        h = self.trunk(board.float())
        logits = self.policy_head(h).masked_fill(~legal, MASKED_LOGIT)
        return logits, torch.tanh(self.value_head(h))[..., 0]


def network_evaluator(net: nn.Module, device: torch.device | None = None) -> Any:
    """An `rlflow.algorithms.alpha_zero.search.Evaluator` of ``net``: one forward pass per
    batch, without gradients; priors are the softmax of the masked logits."""

    def evaluate(obs: Array) -> tuple[Array, Array]:
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(obs, np.float32))
            logits, values = net(x if device is None else x.to(device))
            return torch.softmax(logits, -1).cpu().numpy(), values.cpu().numpy()

    return evaluate


class AlphaZeroActor(ExportableActor):
    """An exported AlphaZero network: acts with the priors' most probable legal move (or a
    draw from them with ``explore``), or by search (:meth:`search`).

    Args:
        observation_space: flat observations, the action mask last.
        action_space: ``Discrete`` actions.
        hidden: the trunk's widths.
        activation: its activation.
        c_puct: the search's exploration constant (the run's).
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        hidden: tuple[int, ...] = (64, 64),
        activation: str = "relu",
        c_puct: float = 1.5,
    ) -> None:
        """Build the network (weights are loaded afterwards, under ``net.``)."""
        super().__init__()
        assert isinstance(action_space, gym.spaces.Discrete)
        size = int(np.prod(observation_space.shape or (1,)))
        self.net = AlphaZeroNet(size, int(action_space.n), tuple(hidden), activation)
        self.c_puct = float(c_puct)

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The masked logits."""
        logits: torch.Tensor = self.net(obs)[0]
        return logits

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """The most probable legal move, or a draw from the priors with ``explore``."""
        logits: torch.Tensor = self.net(obs)[0]
        if explore:
            return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0]
        return logits.argmax(-1)

    def search(
        self, env: Any, obs: Any, *, num_simulations: int, c_puct: float | None = None
    ) -> int:
        """The move a search of ``num_simulations`` simulations chooses (the most visited; no
        noise) in ``env``'s current position, whose mover sees ``obs``.

        ``env`` is the game as rlflow builds it (``rlflow.envs.config_env_creator`` of the
        run's env: a multi-agent env, observations flattened with the mask last), in the
        position to move from, one agent in its ``agents``; it is copied, never stepped
        (`rlflow.algorithms.alpha_zero.game` says what a game must support).
        """
        agents = list(getattr(env, "agents", []))
        if len(agents) != 1:
            raise ConfigError(
                f"search: the env has {len(agents)} agents to move ({agents}); search needs a "
                "game in progress with one mover (an rlflow multi-agent env of a turn-based game)"
            )
        position = GameStep(agents[0], np.asarray(obs, np.float32).reshape(-1), {})
        root = Node(TurnGame(copy_game(env), position, self.net.num_actions), self.net.num_actions)
        run_search(
            [root],
            network_evaluator(self.net),
            num_simulations=int(num_simulations),
            c_puct=self.c_puct if c_puct is None else float(c_puct),
        )
        return select_action(root, explore=False, rng=np.random.default_rng(0))

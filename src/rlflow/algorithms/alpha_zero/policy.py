"""`AlphaZeroPolicy`: the network, its loss, and acting with or without search.

The loss (Silver et al. 2018, eq. 1): ``(z - v)^2 - pi^T log p + c ||theta||^2``, the value's
squared error against the game's outcome ``z`` from the mover's view, the cross-entropy of the
network's policy ``p`` against the search's visit counts ``pi``, and an L2 penalty
(``l2_regularization``), the value term weighted by ``value_loss_coeff``. Acting through
`compute_actions` (the samplers, an evaluation, ``Trainer.compute_actions``) uses the priors
alone, since a search needs the game and not only an observation; self-play and
`rlflow.algorithms.alpha_zero.self_play.play_games` search.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import torch
from torch import nn

from rlflow.algorithms.alpha_zero.config import AlphaZeroConfig
from rlflow.algorithms.alpha_zero.game import check_game
from rlflow.algorithms.alpha_zero.model import AlphaZeroActor, AlphaZeroNet
from rlflow.data.sample_batch import OBS
from rlflow.envs.flatten import ActionMaskBox
from rlflow.errors import ConfigError
from rlflow.models.actors import ActorExport
from rlflow.policy import TorchPolicy

__all__ = ["MCTS_POLICY", "VALUE_TARGET", "AlphaZeroPolicy"]

MCTS_POLICY = "mcts_policy"
"""Column: the search's visit counts at a position, normalized ``[B, A]`` (the policy target)."""
VALUE_TARGET = "value_target"
"""Column: the game's outcome from the view of the player who moved at a position ``[B]``."""


class AlphaZeroPolicy(TorchPolicy):
    """AlphaZero's network (`AlphaZeroNet`) and loss (module docstring).

    Takes flat observations with an action mask (`rlflow.envs.flatten.ActionMaskBox`) and
    ``Discrete`` actions; the game itself is checked by :meth:`check_env`.
    """

    config_class: ClassVar[type[AlphaZeroConfig]] = AlphaZeroConfig
    observation_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Box,)
    action_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Discrete,)

    @classmethod
    def check_env(cls, env: Any, name: str) -> None:
        """Refuse a game the search cannot play (`rlflow.algorithms.alpha_zero.game.
        check_game`): not turn-based, two agents, masked, copyable."""
        check_game(env, name)

    def make_model(self) -> nn.Module:
        """The policy-and-value network over the board (``model.hidden``, ``activation``)."""
        space = self.observation_space
        if not isinstance(space, ActionMaskBox):
            raise ConfigError(
                f"AlphaZeroPolicy needs observations with an action mask (a Dict observation "
                f"with 'action_mask'), got {space}"
            )
        assert isinstance(self.action_space, gym.spaces.Discrete)
        model = self.config.model
        return AlphaZeroNet(
            int(space.shape[0]), int(self.action_space.n), tuple(model.hidden), model.activation
        )

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Cross-entropy to the visit counts, squared error to the outcome, L2."""
        config = self.config
        assert isinstance(config, AlphaZeroConfig)
        logits, values = self.model(batch_tensors[OBS])
        log_p = torch.log_softmax(logits, -1)
        target = batch_tensors[MCTS_POLICY]
        policy_loss = -(target * log_p).sum(-1).mean()
        value_loss = (values - batch_tensors[VALUE_TARGET]).pow(2).mean()
        l2 = sum(p.pow(2).sum() for name, p in self.model.named_parameters() if "bias" not in name)
        total = policy_loss + config.value_loss_coeff * value_loss + config.l2_regularization * l2
        entropy = -(torch.softmax(logits, -1) * log_p).sum(-1).mean()
        return total, {
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "l2": l2,
            "policy_entropy": entropy,
        }

    def export_model(self) -> ActorExport:
        """The network as `AlphaZeroActor` (acting with or without search after loading)."""
        config = self.config
        assert isinstance(config, AlphaZeroConfig)
        options = {
            "hidden": [int(h) for h in config.model.hidden],
            "activation": config.model.activation,
            "c_puct": float(config.c_puct),
        }
        weights = {
            f"net.{k}": v.detach().cpu().numpy().copy() for k, v in self.model.state_dict().items()
        }
        return ActorExport(AlphaZeroActor, options, weights)

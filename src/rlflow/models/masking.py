"""Action masks: a policy's network acts only on legal actions.

An env whose observations carry a legal-action mask (a ``Dict`` observation with an
``"action_mask"`` key, PettingZoo's convention) is flattened with the mask as its last values
(`rlflow.envs.flatten.ActionMaskBox`). :class:`ActionMaskedModel` wraps the network the policy
built for the rest of the observation: it cuts the mask off each observation (it feeds the
whole flat observation with ``model.use_action_mask_as_input``), runs the network, and sets the
action-distribution inputs (logits, or Q-values) of illegal actions to `MASKED_LOGIT`, so their
probability is exactly zero (``exp(MASKED_LOGIT - max)`` underflows to 0.0 in float32), their
``p * log p`` terms in entropies and KL divergences are exactly zero, an argmax never picks
them, and no gradient reaches them. Since the mask is part of every stored observation, a loss
recomputing the network's outputs from a batch masks them exactly as acting did.

Masks need ``Discrete(n)`` (a mask of ``n``) or ``MultiDiscrete(nvec)`` actions (a mask of
``sum(nvec)``: each component's legal values) and are checked when the policy is built. An
exported policy with masks (`rlflow.export`) is a :class:`MaskedActor` around the network's own
exported actor, acting the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlflow.config.model import ModelConfig
from rlflow.errors import ConfigError
from rlflow.models.actors import ActorExport, ExportableActor, class_path
from rlflow.models.actors import actor_class as find_actor_class

__all__ = [
    "MASKED_LOGIT",
    "ActionMaskedModel",
    "MaskedActor",
    "legal_actions",
    "masked_network",
    "unmasked_space",
]

MASKED_LOGIT = -1e9
"""The logit (or Q-value) an illegal action gets."""


def legal_actions(dist_inputs: torch.Tensor) -> torch.Tensor:
    """Which actions were legal where ``dist_inputs`` came from an `ActionMaskedModel` (bool,
    the same shape)."""
    return dist_inputs > MASKED_LOGIT / 2


class ActionMaskedModel(nn.Module):
    """A network acting only on legal actions (module docstring).

    Args:
        model: the network, built for the observations without the mask (or with it, when
            ``feed_mask``); its first output (or its only one) are the action-distribution
            inputs, one per legal-action flag. A recurrent network stays recurrent.
        mask_size: how many of each observation's last values are the mask.
        feed_mask: give ``model`` the whole observation, mask included.
    """

    def __init__(self, model: nn.Module, mask_size: int, *, feed_mask: bool = False) -> None:
        """Wrap ``model``; its parameters are this module's under ``model.``."""
        super().__init__()
        self.model = model
        """The wrapped network."""
        self.mask_size = int(mask_size)
        self.feed_mask = bool(feed_mask)
        initial_state = getattr(model, "initial_state", None)
        if callable(initial_state):  # a recurrent network: so is the wrapper
            self.initial_state = initial_state

    def split(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(the network's input, the legal-action flags)`` of observations ``[..., size]``."""
        legal = obs[..., -self.mask_size :] > 0.5
        return (obs if self.feed_mask else obs[..., : -self.mask_size]), legal

    def forward(self, obs: torch.Tensor, *rest: Any) -> Any:
        """The network's outputs on ``obs`` (and the other inputs of a recurrent one), the
        action-distribution inputs of illegal actions set to `MASKED_LOGIT`."""
        inputs, legal = self.split(obs)
        out = self.model(inputs, *rest)
        if isinstance(out, tuple):
            return (out[0].masked_fill(~legal, MASKED_LOGIT), *out[1:])
        return out.masked_fill(~legal, MASKED_LOGIT)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """The network's value estimates (the mask plays no part)."""
        values: torch.Tensor = self.model.value(self.split(obs)[0])  # type: ignore[operator]
        return values


def masked_network(
    build: Callable[[gym.Space[Any]], nn.Module],
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    model_config: ModelConfig,
    where: str,
) -> nn.Module:
    """``build(observation_space)``, or for observations that carry an action mask
    ``ActionMaskedModel(build(the space without the mask))`` (with the mask, under
    ``model.use_action_mask_as_input``); `ConfigError` naming ``where`` when the action space
    cannot be masked by that mask."""
    # The flat space says how many of its last values are the mask (an ActionMaskBox of
    # rlflow.envs.flatten, whose layer this one does not import).
    size = int(getattr(observation_space, "action_mask_size", 0))
    if not size:
        return build(observation_space)
    _check_mask(size, action_space, where)
    feed = model_config.use_action_mask_as_input
    space = observation_space if feed else unmasked_space(observation_space, size)
    return ActionMaskedModel(build(space), size, feed_mask=feed)


def unmasked_space(space: gym.Space[Any], mask_size: int) -> gym.spaces.Box:
    """The flat observation space ``space`` without its last ``mask_size`` values (the
    mask): what the network of a masked policy takes."""
    assert isinstance(space, gym.spaces.Box)
    low, high = space.low[:-mask_size], space.high[:-mask_size]
    return gym.spaces.Box(low, high, low.shape, np.float32)


class MaskedActor(ExportableActor):
    """An exported policy with action masks: its network's own exported actor (`actor_class`
    with `actor_options`, e.g. an `ActorCriticActor`, a DQN ``QActor`` or a custom model's
    actor), run on each observation without its mask (with it, when ``feed_mask``); the
    action-distribution inputs of illegal actions masked as in `ActionMaskedModel`. Acting:
    the mode or a sample of the masked distribution; a Q network's actor (one with an
    ``epsilon``) acts greedily over the legal actions and explores uniformly over them."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        actor_class: str,
        actor_options: dict[str, Any],
        action_mask_size: int,
        feed_mask: bool = False,
    ) -> None:
        """Build the wrapped actor (weights are loaded afterwards, under ``actor.``)."""
        super().__init__()
        self.mask_size = int(action_mask_size)
        self.feed_mask = bool(feed_mask)
        space = (
            observation_space if feed_mask else unmasked_space(observation_space, self.mask_size)
        )
        self.actor = find_actor_class(actor_class)(space, action_space, **actor_options)
        """The network's own actor."""

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The wrapped network's action inputs, illegal actions' set to ``MASKED_LOGIT``."""
        legal = obs[..., -self.mask_size :] > 0.5
        inputs = self._dist_inputs(obs if self.feed_mask else obs[..., : -self.mask_size])
        return inputs.cpu().masked_fill(~legal, MASKED_LOGIT)

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """Legal actions only: the greedy ones, or with ``explore`` drawn with ``generator``."""
        legal = obs[..., -self.mask_size :] > 0.5
        inputs = self.action_inputs(obs)
        epsilon = getattr(self.actor, "epsilon", None)
        if epsilon is not None:  # a Q network: epsilon-greedy over the legal actions
            greedy = inputs.argmax(dim=-1)
            if not explore:
                return greedy
            random = torch.multinomial(legal.float(), 1, generator=generator)[:, 0]
            draw = torch.rand(len(greedy), generator=generator) < float(epsilon)
            return torch.where(draw, random, greedy)
        dist = self.actor.dist_class(inputs, generator=generator)  # type: ignore[operator]
        actions: torch.Tensor = dist.sample() if explore else dist.deterministic()
        return actions

    def _dist_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        network = getattr(self.actor, "model", self.actor)  # a custom model's actor holds it
        out = network(obs)
        inputs: torch.Tensor = out[0] if isinstance(out, tuple) else out
        return inputs

    @staticmethod
    def export_of(inner: ActorExport, model: ActionMaskedModel) -> ActorExport:
        """The export of a masked policy whose network exports as ``inner``."""
        if callable(getattr(inner.actor_class, "act_with_state", None)):
            raise ConfigError(
                "cannot export a policy with both memory and action masks yet; act with "
                "Trainer.compute_single_action(obs, state=...) instead"
            )
        options = {
            "actor_class": class_path(inner.actor_class),
            "actor_options": inner.options,
            "action_mask_size": model.mask_size,
            "feed_mask": model.feed_mask,
        }
        weights = {f"actor.{k}": v for k, v in inner.weights.items()}
        return ActorExport(MaskedActor, options, weights)


def _check_mask(size: int, action_space: gym.Space[Any], where: str) -> None:
    if isinstance(action_space, gym.spaces.Discrete):
        actions = int(action_space.n)
    elif isinstance(action_space, gym.spaces.MultiDiscrete):
        actions = int(np.sum(action_space.nvec))
    else:
        raise ConfigError(
            f"{where}: the observations carry an action mask ('action_mask'), but the action "
            f"space {action_space} cannot be masked; masks need Discrete or MultiDiscrete actions"
        )
    if actions != size:
        raise ConfigError(
            f"{where}: the observations' action mask has {size} values, but the action space "
            f"{action_space} has {actions} choices; the mask needs one flag per choice"
        )

"""`MemberActor`: one team member's MADDPG actor, acting from that member's own observation.

The decentralized half of MADDPG: what an exported member needs and nothing else (no critic, no
other member's observation, no global state). Its input is the member's own flat observation
(and action mask, when the members' observations carry one), as the env gives it; the actor
pads the observation with zeros to the team's width (`rlflow.envs.groups.TeamBox`), as the
team's rows did in training, so the weights load as they are. Box members act with
``mid + half * tanh(out)`` (exploring: Gaussian noise of ``noise`` in unit space, clipped);
Discrete members with the argmax of their (masked) logits (exploring: a Gumbel-max draw, a
sample of the softmax).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from rlflow.errors import ConfigError
from rlflow.models import MLP
from rlflow.models.actors import ExportableActor

__all__ = ["MASKED_LOGIT", "MemberActor", "gumbel_noise", "masked_logits"]

MASKED_LOGIT = -1e9
"""The logit an illegal action gets (finite, so a softmax of a row stays defined)."""


def masked_logits(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``logits`` with the actions ``mask`` marks illegal (``mask <= 0``) set to
    :data:`MASKED_LOGIT`; ``logits`` as they are without a mask.

    >>> masked_logits(torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0, 0.0]])).tolist()
    [[1.0, -1000000000.0]]
    """
    if mask is None:
        return logits
    return logits.masked_fill(mask <= 0, MASKED_LOGIT)


def gumbel_noise(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Standard Gumbel noise ``-log(-log(U))`` (on CPU) from ``generator``; ``argmax(logits +
    noise)`` is a sample of ``softmax(logits)`` (the Gumbel-max trick)."""
    uniform = torch.rand(shape, generator=generator).clamp(1e-10, 1.0 - 1e-7)
    return -torch.log(-torch.log(uniform))


class MemberActor(MLP, ExportableActor):
    """One member's actor acting on its own (module docstring); the parameter names are those
    of the policy's actor MLP for that member.

    Options: ``obs_size`` (the member's own observation values), ``padded_size`` (the team's
    width), ``mask_size`` (0: no action mask), ``hidden``, ``activation``, ``discrete`` and
    either ``num_actions`` (Discrete) or ``low``/``high`` (Box bounds, lists), ``noise``
    (Box exploration std in unit space). The spaces given to the constructor are checked
    against them: the member's Box of ``obs_size + mask_size`` values and its action space.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        obs_size: int,
        padded_size: int,
        mask_size: int = 0,
        hidden: tuple[int, ...] = (64, 64),
        activation: str = "relu",
        discrete: bool = True,
        num_actions: int = 0,
        low: list[float] | None = None,
        high: list[float] | None = None,
        noise: float = 0.0,
    ) -> None:
        """Build the MLP ``padded_size -> hidden -> actions``; weights are loaded afterwards."""
        out = int(num_actions) if discrete else len(low or [])
        if out < 1 or int(padded_size) < int(obs_size):
            raise ConfigError(
                f"MemberActor: options num_actions={num_actions}, low={low}, obs_size={obs_size}"
                f", padded_size={padded_size} do not describe an actor"
            )
        expected = int(obs_size) + int(mask_size)
        shape = getattr(observation_space, "shape", None)
        if shape is not None and tuple(shape) != (expected,):
            raise ConfigError(
                f"MemberActor: observation_space={observation_space!r} must be the member's "
                f"own observation of {expected} values"
            )
        hidden = tuple(int(h) for h in hidden)
        super().__init__(int(padded_size), hidden, activation=activation, out_features=out)
        self.obs_size, self.padded_size, self.mask_size = (
            int(obs_size),
            int(padded_size),
            int(mask_size),
        )
        self.discrete, self.noise = bool(discrete), float(noise)
        if not self.discrete:
            low_t = torch.tensor(low, dtype=torch.float32)
            high_t = torch.tensor(high, dtype=torch.float32)
            self._mid, self._half = (high_t + low_t) / 2.0, (high_t - low_t) / 2.0

    def _split(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The padded observation ``[B, padded_size]`` and the mask (or None)."""
        flat = obs.reshape(obs.shape[0], -1).float()
        own = flat[:, : self.obs_size]
        pad = torch.zeros(flat.shape[0], self.padded_size - self.obs_size, dtype=flat.dtype)
        mask = flat[:, self.obs_size : self.obs_size + self.mask_size] if self.mask_size else None
        return torch.cat([own, pad.to(flat.device)], dim=1), mask

    def action_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The actor's outputs: masked logits (Discrete) or pre-tanh values (Box)."""
        padded, mask = self._split(obs)
        out: torch.Tensor = self.forward(padded)
        return masked_logits(out, mask) if self.discrete else out

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """The greedy action, or an exploring one drawn with ``generator`` (module docstring)."""
        out = self.action_inputs(obs).cpu()
        if self.discrete:
            if explore:
                out = out + gumbel_noise(tuple(out.shape), generator)
            return out.argmax(dim=-1)
        unit = torch.tanh(out)
        if explore and self.noise > 0:
            draw = torch.randn(unit.shape, generator=generator)
            unit = (unit + self.noise * draw).clamp(-1.0, 1.0)
        return self._mid + self._half * unit

"""Action distributions built from a model's flat output (``action_dist_inputs``).

A distribution wraps one batch of inputs, shaped ``[B, input_dim]``; every method works on the
whole batch and returns one value per row (``[B]``), except :meth:`sample` and
:meth:`deterministic`, which return actions. The inputs layout is the one stored in the
``action_dist_inputs`` column of a SampleBatch, so a learner can rebuild the distribution that
acted (PPO's KL term does).

- :class:`Categorical` for ``Discrete(n)``: inputs are ``n`` unnormalised logits.
- :class:`DiagGaussian` for a 1-D ``Box``: inputs are ``[mean, log_std]`` (``2 * dim`` values);
  actions are not clipped to the box (the env side clips), so ``logp`` stays exact.
- :class:`MultiCategorical` for ``MultiDiscrete(nvec)``: independent categoricals, one per
  component, inputs the ``sum(nvec)`` logits side by side; actions are int64 ``[B, len(nvec)]``
  and ``logp``, ``entropy`` and ``kl`` are summed over the components (the joint distribution's,
  so IMPALA's V-trace ratios and PPO's ratio see the whole action).

Sampling takes an optional ``torch.Generator`` so that a policy seeded once samples the same
actions on every run, whatever else touches torch's global RNG.
"""

from __future__ import annotations

import abc
import functools
import math
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlflow.errors import ConfigError

__all__ = [
    "ActionDistribution",
    "Categorical",
    "DiagGaussian",
    "MultiCategorical",
    "dist_class_for",
    "multi_discrete_nvec",
]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class ActionDistribution(abc.ABC):
    """A batch of action distributions over one action space.

    Args:
        inputs: ``[B, input_dim]`` float tensor, laid out as :meth:`required_input_dim` says.
        generator: RNG used by :meth:`sample`; torch's global RNG when ``None``.
    """

    def __init__(self, inputs: torch.Tensor, *, generator: torch.Generator | None = None) -> None:
        """Wrap ``inputs``; subclasses split them into their parameters."""
        self.inputs = inputs
        self.generator = generator

    @staticmethod
    @abc.abstractmethod
    def required_input_dim(action_space: gym.Space[Any]) -> int:
        """Return the width of the inputs this distribution needs for ``action_space``."""

    @abc.abstractmethod
    def sample(self) -> torch.Tensor:
        """Draw one action per row (no gradient through the draw)."""

    @abc.abstractmethod
    def deterministic(self) -> torch.Tensor:
        """Return the most likely action per row (argmax or mean)."""

    @abc.abstractmethod
    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Return the log-probability (density) of ``actions``, shape ``[B]``."""

    @abc.abstractmethod
    def entropy(self) -> torch.Tensor:
        """Return the entropy of each distribution, shape ``[B]``."""

    @abc.abstractmethod
    def kl(self, other: ActionDistribution) -> torch.Tensor:
        """Return ``KL(self || other)`` per row, shape ``[B]``; ``other`` is the same class."""


class Categorical(ActionDistribution):
    """Categorical distribution over ``Discrete(n)`` from ``n`` logits; actions are int64."""

    def __init__(self, inputs: torch.Tensor, *, generator: torch.Generator | None = None) -> None:
        """Wrap ``inputs`` (see the class docstring for their layout)."""
        super().__init__(inputs, generator=generator)
        self.log_probs = F.log_softmax(inputs, dim=-1)

    @staticmethod
    def required_input_dim(action_space: gym.Space[Any]) -> int:
        """Return ``n`` for ``Discrete(n)``."""
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ConfigError(f"Categorical needs a Discrete action space, got {action_space!r}.")
        return int(action_space.n)

    def sample(self) -> torch.Tensor:
        """Draw one index per row with probabilities ``softmax(logits)``.

        On the CPU this is ``torch.multinomial(probs, 1)``'s own one-sample algorithm written
        out (``argmax(probs / q)`` with ``q ~ Exp(1)`` drawn from the generator: the same draws,
        the same actions, the generator left in the same state) without its three
        synchronizing checks of the probabilities; one finite check of them here raises the
        same `RuntimeError` on NaN or infinite ones.
        """
        probs = self.log_probs.detach().exp()
        if probs.device.type != "cpu" or probs.ndim != 2:
            return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
        # Probabilities are >= 0 or NaN, so their sum is finite exactly when all of them are.
        if not math.isfinite(float(np.add.reduce(probs.numpy(), axis=None))):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        q = torch.empty_like(probs).exponential_(1, generator=self.generator)
        return torch.argmax(probs.div_(q), dim=-1)

    def deterministic(self) -> torch.Tensor:
        """Return the index of the largest logit per row."""
        return torch.argmax(self.inputs, dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Return ``log softmax(logits)[action]`` per row."""
        index = actions.long().unsqueeze(-1)
        return self.log_probs.gather(-1, index).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        """Return ``-sum(p * log p)`` per row."""
        return -(self.log_probs.exp() * self.log_probs).sum(-1)

    def kl(self, other: ActionDistribution) -> torch.Tensor:
        """Return ``sum(p * (log p - log q))`` per row."""
        if not isinstance(other, Categorical):
            raise TypeError(f"Categorical.kl needs another Categorical, got {type(other).__name__}")
        return (self.log_probs.exp() * (self.log_probs - other.log_probs)).sum(-1)


class DiagGaussian(ActionDistribution):
    """Gaussian with diagonal covariance from inputs ``[mean, log_std]``; actions are float32."""

    def __init__(self, inputs: torch.Tensor, *, generator: torch.Generator | None = None) -> None:
        """Wrap ``inputs`` (see the class docstring for their layout)."""
        super().__init__(inputs, generator=generator)
        self.mean, self.log_std = torch.chunk(inputs, 2, dim=-1)
        self.std = self.log_std.exp()

    @staticmethod
    def required_input_dim(action_space: gym.Space[Any]) -> int:
        """Return ``2 * dim`` for a ``Box`` of shape ``(dim,)``."""
        if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
            raise ConfigError(f"DiagGaussian needs a 1-D Box action space, got {action_space!r}.")
        return 2 * int(action_space.shape[0])

    def sample(self) -> torch.Tensor:
        """Draw ``mean + std * eps`` with ``eps ~ N(0, I)`` (no gradient through the draw)."""
        noise = torch.randn(
            self.mean.shape,
            generator=self.generator,
            dtype=self.mean.dtype,
            device=self.mean.device,
        )
        return (self.mean + self.std * noise).detach()

    def deterministic(self) -> torch.Tensor:
        """Return the mean."""
        return self.mean

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Return the log-density of ``actions``, summed over action dimensions."""
        z = (actions - self.mean) / self.std
        return (-0.5 * z.pow(2) - self.log_std - _HALF_LOG_2PI).sum(-1)

    def entropy(self) -> torch.Tensor:
        """Return ``sum(log_std + 0.5 * log(2 * pi * e))`` per row."""
        return (self.log_std + 0.5 + _HALF_LOG_2PI).sum(-1)

    def kl(self, other: ActionDistribution) -> torch.Tensor:
        """Return the closed-form KL between two diagonal Gaussians, summed over dimensions."""
        if not isinstance(other, DiagGaussian):
            raise TypeError(
                f"DiagGaussian.kl needs another DiagGaussian, got {type(other).__name__}"
            )
        var_ratio = (self.std / other.std).pow(2)
        mean_term = ((self.mean - other.mean) / other.std).pow(2)
        return (other.log_std - self.log_std + 0.5 * (var_ratio + mean_term) - 0.5).sum(-1)


class MultiCategorical(ActionDistribution):
    """Independent categoricals over ``MultiDiscrete(nvec)``, one per component.

    Inputs are the components' logits side by side (``sum(nvec)`` values); actions are int64
    ``[B, len(nvec)]``. :meth:`logp`, :meth:`entropy` and :meth:`kl` are the joint
    distribution's: sums over the components. The class :func:`dist_class_for` returns (and
    :meth:`for_nvec` builds) is a subclass with ``nvec`` fixed, so a policy builds it from
    inputs alone, like the other distributions.

    Example:
        >>> dist = MultiCategorical.for_nvec((2, 3))(torch.zeros(1, 5))
        >>> dist.deterministic().tolist(), round(float(dist.entropy()), 4)
        ([[0, 0]], 1.7918)
        >>> round(float(dist.logp(torch.tensor([[1, 2]]))), 4), round(math.log(1 / 6), 4)
        (-1.7918, -1.7918)
    """

    nvec: ClassVar[tuple[int, ...]] = ()
    """Number of choices of each component (set by :meth:`for_nvec`)."""

    def __init__(self, inputs: torch.Tensor, *, generator: torch.Generator | None = None) -> None:
        """Wrap ``inputs`` (see the class docstring for their layout)."""
        super().__init__(inputs, generator=generator)
        if not self.nvec:
            raise TypeError(
                "MultiCategorical has no nvec: build the class with MultiCategorical.for_nvec("
                "nvec) (dist_class_for does)"
            )
        parts = torch.split(inputs, list(self.nvec), dim=-1)
        self.log_probs = [F.log_softmax(part, dim=-1) for part in parts]
        """Per component: normalised log-probabilities ``[B, nvec[i]]``."""

    @staticmethod
    def required_input_dim(action_space: gym.Space[Any]) -> int:
        """Return ``sum(nvec)`` for ``MultiDiscrete(nvec)``."""
        return sum(multi_discrete_nvec(action_space))

    @classmethod
    def for_nvec(cls, nvec: tuple[int, ...]) -> type[MultiCategorical]:
        """The subclass for components of ``nvec`` choices (one class per ``nvec``, cached)."""
        return _multi_categorical(tuple(int(n) for n in nvec))

    def sample(self) -> torch.Tensor:
        """Draw one index per component and row (``[B, len(nvec)]``)."""
        draws = [
            torch.multinomial(lp.detach().exp(), 1, generator=self.generator).squeeze(-1)
            for lp in self.log_probs
        ]
        return torch.stack(draws, dim=-1)

    def deterministic(self) -> torch.Tensor:
        """Return the index of the largest logit of each component (``[B, len(nvec)]``)."""
        return torch.stack([torch.argmax(lp, dim=-1) for lp in self.log_probs], dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Return ``sum_i log softmax(logits_i)[action_i]`` per row."""
        index = actions.long()
        parts = [lp.gather(-1, index[..., i : i + 1]) for i, lp in enumerate(self.log_probs)]
        return torch.cat(parts, dim=-1).sum(-1)

    def entropy(self) -> torch.Tensor:
        """Return the sum over components of ``-sum(p * log p)`` per row."""
        parts = [-(lp.exp() * lp).sum(-1) for lp in self.log_probs]
        return torch.stack(parts, dim=-1).sum(-1)

    def kl(self, other: ActionDistribution) -> torch.Tensor:
        """Return the sum over components of ``sum(p * (log p - log q))`` per row."""
        if not isinstance(other, MultiCategorical) or other.nvec != self.nvec:
            raise TypeError(
                f"MultiCategorical.kl needs another MultiCategorical over nvec={self.nvec}, got "
                f"{type(other).__name__}"
            )
        pairs = zip(self.log_probs, other.log_probs, strict=True)
        parts = [(lp.exp() * (lp - lq)).sum(-1) for lp, lq in pairs]
        return torch.stack(parts, dim=-1).sum(-1)


@functools.cache
def _multi_categorical(nvec: tuple[int, ...]) -> type[MultiCategorical]:
    """The `MultiCategorical` subclass with ``nvec`` fixed (built once per ``nvec``)."""
    name = f"MultiCategorical{list(nvec)}"
    return type(name, (MultiCategorical,), {"nvec": nvec, "__qualname__": name})


def multi_discrete_nvec(action_space: gym.Space[Any]) -> tuple[int, ...]:
    """``nvec`` of a 1-D ``MultiDiscrete`` whose components start at 0; `ConfigError` naming
    the space otherwise."""
    if not isinstance(action_space, gym.spaces.MultiDiscrete):
        raise ConfigError(
            f"MultiCategorical needs a MultiDiscrete action space, got {action_space!r}."
        )
    if action_space.nvec.ndim != 1 or np.any(action_space.start != 0):
        raise ConfigError(
            f"Action space {action_space!r}: rlflow supports MultiDiscrete action spaces with a "
            "1-D nvec and components starting at 0. Wrap the env to reshape or shift its actions."
        )
    return tuple(int(n) for n in action_space.nvec)


def dist_class_for(action_space: gym.Space[Any]) -> type[ActionDistribution]:
    """Return the distribution class for ``action_space``.

    ``Discrete`` (starting at 0) gives :class:`Categorical`; a 1-D ``Box`` gives
    :class:`DiagGaussian`; a ``MultiDiscrete`` with a 1-D ``nvec`` (starting at 0) gives
    :class:`MultiCategorical` for its ``nvec``. Any other space raises :class:`ConfigError`
    naming it.
    """
    if isinstance(action_space, gym.spaces.Discrete):
        if int(action_space.start) != 0:
            raise ConfigError(
                f"Action space {action_space!r} starts at {int(action_space.start)}; rlflow "
                "supports Discrete spaces starting at 0. Wrap the env to shift its actions."
            )
        return Categorical
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return DiagGaussian
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return MultiCategorical.for_nvec(multi_discrete_nvec(action_space))
    raise ConfigError(
        f"Unsupported action space {action_space!r}: rlflow has distributions for Discrete, "
        "MultiDiscrete and 1-D Box action spaces. Flatten or wrap the env's action space."
    )

"""DreamerV3's networks: the world model (RSSM, encoder, decoder, reward and continue heads),
the actor and the critic, held by one module that also acts step by step.

The RSSM (recurrent state-space model) keeps a deterministic state ``h`` (a GRU of
``gru_units``) and a stochastic one ``z`` (``num_latents`` one-hot categoricals of
``num_classes``, 1% uniform mix, straight-through gradients). One step::

    h_t   = GRU(h_{t-1}, MLP([z_{t-1}, a_{t-1}]))      (zeroed where an episode starts)
    prior = MLP(h_t)                  -> z_t^ ~ p(z | h_t)            (the dynamics)
    post  = MLP([h_t, embed(o_t)])    -> z_t  ~ q(z | h_t, o_t)       (the representation)

The model state ``s_t = [h_t, z_t]`` feeds the decoder (symlog vector observations, or images
through a transposed CNN), the reward head (two-hot over 255 symlog bins), the continue head
(Bernoulli), the actor and the critic (two-hot). Every MLP layer is a linear map, LayerNorm and
SiLU; reward and critic output layers start at zero (the paper's trick against large early
predictions).

`DreamerV3Model` follows the recurrent model protocol of `rlflow.models.recurrent` for acting:
``initial_state``, and ``forward(obs [B, T, ...], state, prev_actions, prev_rewards)`` returning
the actor's distribution inputs, the critic's values and the state after the steps; its state
is ``[h, z (flat), started]``, where ``started`` is 0 before an episode's first step (the step
then starts from zeros, as in training where a sequence crosses an episode's start).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any, NamedTuple, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlflow.algorithms.dreamerv3.config import MODEL_SIZES, ModelSize
from rlflow.algorithms.dreamerv3.functions import symlog, twohot_bins, twohot_mean, unimix_logits
from rlflow.errors import ConfigError
from rlflow.models.actors import ActorExport
from rlflow.models.distributions import dist_class_for
from rlflow.models.memory import RecurrentInputs
from rlflow.models.recurrent import StatefulActor

__all__ = [
    "ACTING_PARTS",
    "ActionCodec",
    "DreamerV3Actor",
    "DreamerV3Model",
    "ImageDecoder",
    "ImageEncoder",
    "LatentState",
    "RSSM",
    "dense",
    "head_on_latent",
    "latent_linear",
    "one_hot_matmul",
    "transposes_reused",
    "observation_kind",
]

IMAGE_MIN_SIDE = 8
"""The smallest image side the CNN takes (it halves it down to about 4)."""


def observation_kind(space: gym.Space[Any], name: str) -> str:
    """``"vector"`` for a 1-D ``Box``, ``"image"`` for a 3-D ``Box`` ``(H, W, C)`` with sides
    divisible by the CNN's strides; `ConfigError` naming ``name`` (the env) otherwise."""
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return "vector"
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 3:
        h, w, c = space.shape
        stages = cnn_stages(h, w)
        if min(h, w) >= IMAGE_MIN_SIDE and h % 2**stages == 0 and w % 2**stages == 0 and c <= 4:
            return "image"
    raise ConfigError(
        f"DreamerV3 cannot encode the observations of env {name!r}: {space}; it takes a 1-D Box "
        "(vectors, through an MLP) or a 3-D Box (H, W, C) image with C <= 4 and sides >= "
        f"{IMAGE_MIN_SIDE} divisible by 2**stages (e.g. 64x64x3; through a CNN). Flatten or "
        "resize the observations with a wrapper (env_wrappers)."
    )


def cnn_stages(h: int, w: int) -> int:
    """Stride-2 stages that bring the smaller side of an image to about 4."""
    return max(1, int(math.log2(max(min(h, w), 1) / 4)))


def dense(in_dim: int, units: int, layers: int) -> nn.Sequential:
    """``layers`` blocks of linear (no bias), LayerNorm and SiLU."""
    blocks: list[nn.Module] = []
    for _ in range(layers):
        blocks += [nn.Linear(in_dim, units, bias=False), nn.LayerNorm(units), nn.SiLU()]
        in_dim = units
    return nn.Sequential(*blocks)


def _head(in_dim: int, out_dim: int, size: ModelSize, *, zero: bool = False) -> nn.Sequential:
    """An MLP of the model size, then a linear output (zero-initialised with ``zero``)."""
    out = nn.Linear(size.dense_units, out_dim)
    if zero:
        nn.init.zeros_(out.weight)
        nn.init.zeros_(out.bias)
    return nn.Sequential(dense(in_dim, size.dense_units, size.num_layers), out)


class ImageEncoder(nn.Module):
    """Stride-2 convolutions (kernel 4, ``depth`` channels doubling), LayerNorm over channels,
    SiLU, flattened; pixels ``uint8`` ``[..., H, W, C]`` scaled to ``[-0.5, 0.5]``."""

    def __init__(self, shape: tuple[int, int, int], depth: int) -> None:
        super().__init__()
        h, w, c = shape
        self.stages = cnn_stages(h, w)
        layers: list[nn.Module] = []
        channels = c
        for k in range(self.stages):
            out = depth * 2**k
            layers += [nn.Conv2d(channels, out, 4, 2, 1), _ChannelNorm(out), nn.SiLU()]
            channels = out
        self.net = nn.Sequential(*layers)
        self.out_shape = (channels, h // 2**self.stages, w // 2**self.stages)
        self.out_dim = int(np.prod(self.out_shape))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        lead = obs.shape[:-3]
        x = obs.reshape(-1, *obs.shape[-3:]).float() / 255.0 - 0.5
        x = self.net(x.permute(0, 3, 1, 2))
        out: torch.Tensor = x.reshape(*lead, -1)
        return out


class ImageDecoder(nn.Module):
    """The encoder mirrored: a linear map to its last feature map, transposed convolutions back
    to ``[..., H, W, C]`` (the reconstruction of pixels scaled to ``[-0.5, 0.5]``)."""

    def __init__(self, in_dim: int, encoder: ImageEncoder, channels: int) -> None:
        super().__init__()
        self.shape = encoder.out_shape
        self.linear = nn.Linear(in_dim, encoder.out_dim)
        layers: list[nn.Module] = []
        depth = self.shape[0]
        for k in reversed(range(encoder.stages)):
            last = k == 0
            out = channels if last else depth // 2
            layers.append(nn.ConvTranspose2d(depth, out, 4, 2, 1))
            if not last:
                layers += [_ChannelNorm(out), nn.SiLU()]
            depth = out
        self.net = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        lead = features.shape[:-1]
        x = self.linear(features).reshape(-1, *self.shape)
        x = self.net(x).permute(0, 2, 3, 1)
        out: torch.Tensor = x.reshape(*lead, *x.shape[1:])
        return out


class _ChannelNorm(nn.Module):
    """LayerNorm over the channels of ``[N, C, H, W]``."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return out


class LatentState(NamedTuple):
    """The RSSM's state at a step: ``h`` ``[..., gru_units]`` and ``z`` one-hot, flattened
    ``[..., latents * classes]``; ``positions`` ``[..., latents]`` (optional), the position of each
    latent's one in ``z``, which lets a linear layer read ``z`` as a sum of 32 weight rows
    instead of a product with 1,024 mostly-zero features (:func:`latent_linear`)."""

    h: torch.Tensor
    z: torch.Tensor
    positions: torch.Tensor | None = None

    def features(self) -> torch.Tensor:
        """``[h, z]``, what the heads read."""
        return torch.cat([self.h, self.z], -1)

    def detach(self) -> LatentState:
        """The state without gradient (the same ``positions``)."""
        return LatentState(self.h.detach(), self.z.detach(), self.positions)

    def map(self, fn: Any) -> LatentState:
        """``fn`` applied to each tensor (``positions`` too, where there are)."""
        positions = None if self.positions is None else fn(self.positions)
        return LatentState(fn(self.h), fn(self.z), positions)

    def one_hot_only(self) -> bool:
        """``z`` is one-hot at ``positions`` (its value; a straight-through gradient may flow
        through it): a linear layer may read it through ``positions`` (the same sums, 1/32 of
        the multiplications)."""
        return self.positions is not None


_TRANSPOSED: list[dict[tuple[int, tuple[int, ...], int, bool], torch.Tensor]] = []
"""The weight transposes made inside :func:`transposes_reused` (innermost last)."""


@contextlib.contextmanager
def transposes_reused() -> Iterator[None]:
    """Inside, :func:`one_hot_matmul` makes each weight's transposed copy once (per weight
    slice, version and gradient mode) instead of at every call: a train step's imagination
    reads the same weights at every step. Use it around one forward pass (the weights must not
    change inside)."""
    _TRANSPOSED.append({})
    try:
        yield
    finally:
        _TRANSPOSED.pop()


def _transposed(z_weight: torch.Tensor) -> torch.Tensor:
    """``z_weight.T`` contiguous (reused inside :func:`transposes_reused`)."""
    if not _TRANSPOSED:
        return z_weight.t().contiguous()
    grad = torch.is_grad_enabled() and z_weight.requires_grad
    key = (z_weight.data_ptr(), tuple(z_weight.shape), z_weight._version, grad)
    cache = _TRANSPOSED[-1]
    out = cache.get(key)
    if out is None:
        out = cache[key] = z_weight.t().contiguous()
    return out


def one_hot_matmul(
    z_weight: torch.Tensor, index: torch.Tensor, z: torch.Tensor | None = None
) -> torch.Tensor:
    """``z @ z_weight.T`` for a one-hot ``z`` given by ``index`` ``[..., latents]``: the
    columns of ``z_weight`` ``[units, latents * classes]`` at ``index`` summed (an
    ``embedding_bag``), ``[..., units]``. With ``z`` itself (its value one-hot at ``index``)
    when a gradient flows through it (straight-through draws): the backward pass is the dense
    product's, ``grad @ z_weight`` to ``z`` and ``grad.T @ z`` to the weight."""
    if z is not None and z.requires_grad:
        out: torch.Tensor = _OneHotMatmul.apply(z, index, z_weight)  # type: ignore[no-untyped-call]
        return out
    return _bag_sum(z_weight, index)


def _bag_sum(z_weight: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The columns of ``z_weight`` at ``index`` ``[..., latents]`` summed, ``[..., units]``."""
    flat = index.reshape(-1, index.shape[-1])
    summed = nn.functional.embedding_bag(flat, _transposed(z_weight), mode="sum")
    return summed.reshape(*index.shape[:-1], -1)


class _OneHotMatmul(torch.autograd.Function):
    """``z @ w.T`` for ``z`` one-hot at ``index``: forward by ``embedding_bag``, backward as
    the dense product's."""

    @staticmethod
    def forward(ctx: Any, z: torch.Tensor, index: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(z, w)
        return _bag_sum(w, index)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, Any]:
        z, w = ctx.saved_tensors
        grad_z = grad @ w if ctx.needs_input_grad[0] else None
        grad_w = None
        if ctx.needs_input_grad[2]:
            grad_w = grad.reshape(-1, grad.shape[-1]).t() @ z.reshape(-1, z.shape[-1])
        return grad_z, None, grad_w


def latent_linear(linear: nn.Linear, state: LatentState) -> torch.Tensor:
    """``linear([h, z])``; for a one-hot ``z`` with its positions (:meth:`LatentState.
    one_hot_only`), ``linear(h)``'s part plus the sum of the weight's columns at ``z``'s ones
    (`one_hot_matmul`)."""
    if not state.one_hot_only():
        out: torch.Tensor = linear(state.features())
        return out
    assert state.positions is not None
    width = state.h.shape[-1]
    h_part = nn.functional.linear(state.h, linear.weight[:, :width], linear.bias)
    return h_part + one_hot_matmul(linear.weight[:, width:], state.positions, state.z)


def head_on_latent(head: nn.Sequential, state: LatentState) -> torch.Tensor:
    """A head built by :func:`_head` (``Sequential(dense(...), out)``) on the state's features,
    its first linear layer through :func:`latent_linear`."""
    if not state.one_hot_only():
        out: torch.Tensor = head(state.features())
        return out
    body, last = cast(nn.Sequential, head[0]), head[1]
    x = latent_linear(cast(nn.Linear, body[0]), state)
    for layer in list(body)[1:]:
        x = layer(x)
    out = last(x)
    return out


class RSSM(nn.Module):
    """The recurrent state-space model (module docstring)."""

    def __init__(self, size: ModelSize, embed_dim: int, action_dim: int, unimix: float) -> None:
        super().__init__()
        self.size, self.unimix = size, unimix
        self.stoch_dim = size.num_latents * size.num_classes
        self.img_in = dense(self.stoch_dim + action_dim, size.dense_units, 1)
        self.gru = nn.GRUCell(size.dense_units, size.gru_units)
        self.prior_net = nn.Sequential(
            dense(size.gru_units, size.dense_units, 1), nn.Linear(size.dense_units, self.stoch_dim)
        )
        self.post_net = nn.Sequential(
            dense(size.gru_units + embed_dim, size.dense_units, 1),
            nn.Linear(size.dense_units, self.stoch_dim),
        )

    def initial(self, batch: int, device: torch.device) -> LatentState:
        """Zeros (what an episode starts from)."""
        return LatentState(
            torch.zeros(batch, self.size.gru_units, device=device),
            torch.zeros(batch, self.stoch_dim, device=device),
        )

    def _logits(self, net: nn.Module, x: torch.Tensor) -> torch.Tensor:
        logits = net(x).reshape(*x.shape[:-1], self.size.num_latents, self.size.num_classes)
        return unimix_logits(logits, self.unimix)

    def sample(
        self, logits: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """One-hot draws of the latents ``[..., latents, classes]`` -> flat ``[..., L * C]``,
        with straight-through gradients to the probabilities."""
        return self.draw(logits, generator)[0]

    def draw(
        self, logits: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`sample` and the position of each latent's one in the flat sample,
        ``[..., latents]``."""
        probs = torch.softmax(logits, -1)
        # Inverse-CDF draws: one uniform per latent (cheaper than torch.multinomial here).
        cdf = probs.detach().cumsum(-1)
        u = torch.rand(
            (*probs.shape[:-1], 1), generator=generator, device=probs.device, dtype=probs.dtype
        )
        index = (cdf < u * cdf[..., -1:]).sum(-1).clamp(max=probs.shape[-1] - 1)
        onehot = nn.functional.one_hot(index, probs.shape[-1]).to(probs.dtype)
        onehot = onehot.reshape(probs.shape)
        sample = onehot + probs - probs.detach() if probs.requires_grad else onehot
        offsets = torch.arange(probs.shape[-2], device=index.device) * probs.shape[-1]
        return sample.reshape(*sample.shape[:-2], -1), index + offsets

    def img_step(
        self, prev: LatentState, action: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[LatentState, torch.Tensor]:
        """One step of the dynamics from ``prev`` and the action taken there: the state with
        ``z`` drawn from the prior, and the prior's logits."""
        h = self.gru(self._img_in(prev, action), prev.h)
        prior = self._logits(self.prior_net, h)
        return LatentState(h, *self.draw(prior, generator)), prior

    def _img_in(self, prev: LatentState, action: torch.Tensor) -> torch.Tensor:
        """``img_in([z, action])``, ``z`` read through its ones where they are known
        (`latent_linear`)."""
        if not prev.one_hot_only():
            out: torch.Tensor = self.img_in(torch.cat([prev.z, action], -1))
            return out
        assert prev.positions is not None
        linear, stoch = cast(nn.Linear, self.img_in[0]), self.stoch_dim
        x = one_hot_matmul(linear.weight[:, :stoch], prev.positions, prev.z)
        x = x + nn.functional.linear(action, linear.weight[:, stoch:], linear.bias)
        for layer in list(self.img_in)[1:]:
            x = layer(x)
        return x

    def obs_step(
        self,
        prev: LatentState,
        action: torch.Tensor,
        embed: torch.Tensor,
        generator: torch.Generator | None = None,
    ) -> tuple[LatentState, torch.Tensor, torch.Tensor]:
        """One step with an observation: ``(state with z from the posterior, post logits,
        prior logits)``."""
        h = self.gru(self.img_in(torch.cat([prev.z, action], -1)), prev.h)
        prior = self._logits(self.prior_net, h)
        post = self._logits(self.post_net, torch.cat([h, embed], -1))
        return LatentState(h, *self.draw(post, generator)), post, prior


class ActionCodec:
    """The env's actions as the world model and the actor see them: ``Discrete`` as one-hot,
    a 1-D ``Box`` scaled to ``[-1, 1]`` (clipped); the actor's outputs as the distribution inputs
    of rlflow's action distributions (`Categorical` logits, or `DiagGaussian`'s mean and log-std
    in the env's units)."""

    def __init__(self, space: gym.Space[Any]) -> None:
        if isinstance(space, gym.spaces.Discrete):
            self.discrete, self.dim = True, int(space.n)
            self.center = self.half = np.zeros(0, np.float32)
        elif isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
            low, high = space.low.astype(np.float64), space.high.astype(np.float64)
            if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
                raise ConfigError(
                    f"DreamerV3 needs bounded Box actions (it acts in [-1, 1] scaled to the "
                    f"bounds), got {space}"
                )
            self.discrete, self.dim = False, int(space.shape[0])
            self.center = ((high + low) / 2).astype(np.float32)
            self.half = ((high - low) / 2).astype(np.float32)
        else:
            raise ConfigError(
                f"DreamerV3 takes Discrete or 1-D Box actions, got {space}"  # policy checks first
            )

    def encode(self, actions: np.ndarray) -> np.ndarray:
        """Env actions ``[N]`` or ``[N, D]`` as the model's inputs ``[N, dim]`` (float32)."""
        if self.discrete:
            onehot: np.ndarray = np.eye(self.dim, dtype=np.float32)[np.asarray(actions, np.int64)]
            return onehot
        scaled = (np.asarray(actions, np.float32) - self.center) / self.half
        clipped: np.ndarray = np.clip(scaled, -1.0, 1.0).astype(np.float32)
        return clipped

    def encode_tensor(self, actions: torch.Tensor) -> torch.Tensor:
        """As :meth:`encode`, on tensors."""
        if self.discrete:
            return nn.functional.one_hot(actions.long(), self.dim).float()
        center = torch.as_tensor(self.center, device=actions.device)
        half = torch.as_tensor(self.half, device=actions.device)
        return ((actions.float() - center) / half).clamp(-1.0, 1.0)

    def dist_inputs(self, actor_out: torch.Tensor) -> torch.Tensor:
        """The actor's outputs in the env's units, as rlflow's distribution reads them."""
        if self.discrete:
            return actor_out
        mean, std = actor_out.chunk(2, -1)
        center = torch.as_tensor(self.center, device=actor_out.device)
        half = torch.as_tensor(self.half, device=actor_out.device)
        return torch.cat([center + half * mean, torch.log(std * half)], -1)


class DreamerV3Model(nn.Module):
    """World model, actor, critic and slow critic (module docstring).

    Args:
        obs_space: a 1-D ``Box`` or an image (`observation_kind`).
        action_space: ``Discrete`` or a bounded 1-D ``Box``.
        size: the model size (`rlflow.algorithms.dreamerv3.config.MODEL_SIZES`).
        unimix: the uniform mix of the latents' and discrete actor's categoricals.
        name: the env, for messages.
    """

    bins: torch.Tensor
    """The two-hot bins (a buffer: it follows the model's device)."""
    return_range: torch.Tensor
    """The EMA of the imagined returns' 5th and 95th percentiles (a buffer)."""
    return_range_seen: torch.Tensor
    """1 once :attr:`return_range` holds a batch's percentiles (a buffer)."""

    def __init__(
        self,
        obs_space: gym.Space[Any],
        action_space: gym.Space[Any],
        size: ModelSize,
        unimix: float,
        name: str = "env",
    ) -> None:
        super().__init__()
        self.kind = observation_kind(obs_space, name)
        self.codec = ActionCodec(action_space)
        self.size, self.unimix = size, unimix
        shape = tuple(int(s) for s in obs_space.shape)  # type: ignore[union-attr]
        self.obs_shape = shape
        if self.kind == "image":
            self.image_encoder = ImageEncoder(shape, size.cnn_depth)  # type: ignore[arg-type]
            embed_dim = self.image_encoder.out_dim
            self.encoder: nn.Module = self.image_encoder
        else:
            self.encoder = dense(shape[0], size.dense_units, size.num_layers)
            embed_dim = size.dense_units
        self.rssm = RSSM(size, embed_dim, self.codec.dim, unimix)
        feat = size.gru_units + self.rssm.stoch_dim
        if self.kind == "image":
            self.decoder: nn.Module = ImageDecoder(feat, self.image_encoder, shape[-1])
        else:
            self.decoder = _head(feat, shape[0], size)
        self.reward_head = _head(feat, 255, size, zero=True)
        self.continue_head = _head(feat, 1, size)
        out = self.codec.dim if self.codec.discrete else 2 * self.codec.dim
        self.actor = _head(feat, out, size)
        self.critic = _head(feat, 255, size, zero=True)
        self.slow_critic = _head(feat, 255, size, zero=True)
        self.slow_critic.load_state_dict(self.critic.state_dict())
        for p in self.slow_critic.parameters():
            p.requires_grad_(False)
        self.register_buffer("bins", twohot_bins())
        self.register_buffer("return_range", torch.zeros(2))  # EMA of the 5th, 95th percentile
        self.register_buffer("return_range_seen", torch.zeros(()))

    # -- parts -----------------------------------------------------------------------------

    def world_model_parameters(self) -> list[nn.Parameter]:
        """Encoder, RSSM, decoder, reward and continue heads."""
        parts = [self.encoder, self.rssm, self.decoder, self.reward_head, self.continue_head]
        return [p for m in parts for p in m.parameters()]

    def embed(self, obs: torch.Tensor) -> torch.Tensor:
        """The encoder's embedding of observations ``[..., *obs_shape]``."""
        x = obs if self.kind == "image" else symlog(obs.float())
        out: torch.Tensor = self.encoder(x)
        return out

    def actor_outputs(self, features: torch.Tensor | LatentState) -> torch.Tensor:
        """The actor on features (or a `LatentState`): discrete logits (1% uniform mix), or a
        bounded normal's ``[mean, std]`` in ``[-1, 1]`` units (mean ``tanh``, std in
        ``[0.1, 1]``)."""
        out = self._run(self.actor, features)
        if self.codec.discrete:
            return unimix_logits(out, self.unimix)
        mean, std = out.chunk(2, -1)
        return torch.cat([torch.tanh(mean), 0.9 * torch.sigmoid(std + 2.0) + 0.1], -1)

    def value(self, features: torch.Tensor | LatentState, *, slow: bool = False) -> torch.Tensor:
        """The critic's (or the slow critic's) value ``[...]`` of model states (features or a
        `LatentState`)."""
        net = self.slow_critic if slow else self.critic
        return twohot_mean(self._run(net, features), self.bins)

    @staticmethod
    def _run(head: nn.Sequential, features: torch.Tensor | LatentState) -> torch.Tensor:
        """A head on features, or on a `LatentState` (`head_on_latent`)."""
        if isinstance(features, LatentState):
            return head_on_latent(head, features)
        out: torch.Tensor = head(features)
        return out

    # -- acting (the recurrent model protocol) ----------------------------------------------

    def initial_state(self, batch: int) -> list[torch.Tensor]:
        """``[h, z, started]``: zeros, not started."""
        device = self.bins.device
        start = self.rssm.initial(batch, device)
        return [start.h, start.z, torch.zeros(batch, 1, device=device)]

    def forward(
        self,
        obs: torch.Tensor,
        state: list[torch.Tensor],
        prev_actions: torch.Tensor | None = None,
        prev_rewards: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """Steps of the posterior over ``obs`` ``[B, T, ...]`` from ``state``, the previous
        action of each step ``prev_actions`` ``[B, T, ...]`` (env units; ignored where a state
        has not started): ``(dist_inputs [B, T, D], values [B, T], state after)``. Acting
        draws the latents from torch's global RNG (the policy forks it per call)."""
        del prev_rewards
        h, z, started = state
        embeds = self.embed(obs)
        out, values = [], []
        steps = obs.shape[1]
        for t in range(steps):
            if prev_actions is None:
                action = torch.zeros(obs.shape[0], self.codec.dim, device=obs.device)
            else:
                action = self.codec.encode_tensor(prev_actions[:, t])
            prev = LatentState(h * started, z * started)
            latent, _, _ = self.rssm.obs_step(prev, action * started, embeds[:, t])
            h, z = latent.h, latent.z
            started = torch.ones_like(started)
            features = latent.features()
            out.append(self.codec.dist_inputs(self.actor_outputs(features)))
            values.append(self.value(features))
        return torch.stack(out, 1), torch.stack(values, 1), [h, z, started]


ACTING_PARTS = ("encoder.", "image_encoder.", "rssm.", "actor.", "critic.", "bins")
"""The state-dict entries acting needs (an export keeps these): the encoder, the RSSM, the actor
and the critic (the step's values) and the two-hot bins."""


class DreamerV3Actor(DreamerV3Model, StatefulActor):
    """A DreamerV3 policy exported (`rlflow.load_policy`): from the env's own observation, the
    encoder and the RSSM's posterior step (its state ``[h, z, started]`` carried between calls,
    `LoadedPolicy.get_initial_state` at an episode's start; the previous action passed as
    ``prev_action``, as the workers do) and the actor. The latents are drawn from torch's RNG
    forked per call and seeded from the loaded policy's generator, as the learner's policy
    does, so the same seed gives the learner's actions. Decoder, reward and continue heads and
    the slow critic are not part of it. An ONNX export (`rlflow.export.onnx.export_onnx`) traces
    the same step, its latents then drawn by the runtime's RNG.

    Args:
        observation_space: as the policy's.
        action_space: as the policy's.
        model_size: the policy's ``model_size``.
        unimix: the policy's ``unimix``.
    """

    use_prev_action = True
    """The previous action is an input of each step (`rlflow.export.onnx` reads this)."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        model_size: str = "XS",
        unimix: float = 0.01,
    ) -> None:
        """Build the acting parts (weights are loaded afterwards)."""
        super().__init__(observation_space, action_space, MODEL_SIZES[model_size], float(unimix))
        for part in ("decoder", "reward_head", "continue_head", "slow_critic"):
            delattr(self, part)
        del self.return_range, self.return_range_seen
        self.dist_class = dist_class_for(action_space)

    def network_step(self, *inputs: Any) -> tuple[torch.Tensor, torch.Tensor, list[Any]]:
        """`DreamerV3Model.forward`."""
        return self.forward(*inputs)

    def act_with_state(
        self,
        obs: torch.Tensor,
        memory: RecurrentInputs,
        *,
        explore: bool,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """`StatefulActor.act_with_state`, the latents drawn from torch's RNG forked and seeded
        from ``generator`` (as `DreamerV3Policy.compute_actions` does)."""
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return super().act_with_state(obs, memory, explore=explore, generator=generator)

    @staticmethod
    def export_of(model: DreamerV3Model, model_size: str) -> ActorExport:
        """The export of a policy's ``model``: the acting parts' weights (`ACTING_PARTS`)."""
        weights = {
            k: v.detach().cpu().numpy().copy()
            for k, v in model.state_dict().items()
            if k.startswith(ACTING_PARTS)
        }
        options = {"model_size": model_size, "unimix": float(model.unimix)}
        return ActorExport(DreamerV3Actor, options, weights)

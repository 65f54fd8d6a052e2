"""DreamerV3's math as small pure functions (Hafner et al. 2023, section 2 and appendix).

- :func:`symlog` / :func:`symexp`: the squashing of vector inputs, decoder targets, rewards and
  returns, ``symlog(x) = sign(x) ln(1 + |x|)`` and its inverse.
- :func:`twohot` / :func:`twohot_mean`: a scalar as a two-hot vector over bins spaced evenly in
  symlog space (255 bins in ``[-20, 20]``), and the expected value of a distribution over them
  brought back with ``symexp``; :func:`twohot_loss` the cross-entropy a reward or critic head
  learns with.
- :func:`unimix_logits`: categorical logits mixed with 1% uniform.
- :func:`kl_balance`: the dynamics and representation KL losses with free bits.
- :func:`lambda_returns`: the bootstrapped lambda-returns of an imagined trajectory.

Every function works on torch tensors of any leading shape.
"""

from __future__ import annotations

import torch

__all__ = [
    "KLTerms",
    "kl_balance",
    "lambda_returns",
    "symexp",
    "symlog",
    "twohot",
    "twohot_bins",
    "twohot_loss",
    "twohot_mean",
    "unimix_logits",
]


def symlog(x: torch.Tensor) -> torch.Tensor:
    """``sign(x) ln(1 + |x|)``.

    >>> float(symlog(torch.tensor(-(torch.e - 1))))
    -1.0
    """
    return torch.sign(x) * torch.log1p(x.abs())


def symexp(x: torch.Tensor) -> torch.Tensor:
    """``sign(x) (exp(|x|) - 1)``, the inverse of :func:`symlog`."""
    return torch.sign(x) * torch.expm1(x.abs())


def twohot_bins(
    num_bins: int = 255, low: float = -20.0, high: float = 20.0, device: torch.device | None = None
) -> torch.Tensor:
    """``num_bins`` evenly spaced bin centres in symlog space, ``[low, high]`` (the paper: 255
    in ``[-20, 20]``)."""
    return torch.linspace(low, high, num_bins, device=device)


def twohot(x: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """``x`` (already in the bins' space: pass ``symlog(y)``) as two-hot vectors ``[..., K]``:
    the weight split between the two nearest bins in proportion to closeness, so that
    ``(twohot(x) * bins).sum(-1) == x`` for ``x`` within the bins; outside, all weight on the
    end bin.
    """
    x = x.clamp(float(bins[0]), float(bins[-1]))
    above = torch.searchsorted(bins, x.contiguous(), right=True).clamp(1, len(bins) - 1)
    below = above - 1
    lo, hi = bins[below], bins[above]
    w_hi = ((x - lo) / (hi - lo)).clamp(0.0, 1.0)
    out = torch.zeros((*x.shape, len(bins)), dtype=x.dtype, device=x.device)
    out.scatter_(-1, below.unsqueeze(-1), (1.0 - w_hi).unsqueeze(-1))
    out.scatter_add_(-1, above.unsqueeze(-1), w_hi.unsqueeze(-1))
    return out


def twohot_mean(logits: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """The prediction of a two-hot head: ``symexp(sum_k softmax(logits)_k bins_k)``, ``[...]``."""
    return symexp((torch.softmax(logits, -1) * bins).sum(-1))


def twohot_loss(logits: torch.Tensor, target: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """Cross-entropy ``[...]`` of a two-hot head's ``logits`` ``[..., K]`` to the two-hot
    encoding of ``symlog(target)`` ``[...]`` (no gradient through the target)."""
    encoded = twohot(symlog(target.detach()), bins)
    return -(encoded * torch.log_softmax(logits, -1)).sum(-1)


def unimix_logits(logits: torch.Tensor, unimix: float) -> torch.Tensor:
    """Logits of ``(1 - unimix) softmax(logits) + unimix / K`` (the paper: 1%), so no class has a
    probability near zero (KLs and log-likelihoods stay finite)."""
    if unimix <= 0.0:
        return logits
    probs = torch.softmax(logits, -1)
    probs = (1.0 - unimix) * probs + unimix / logits.shape[-1]
    return torch.log(probs)


class KLTerms:
    """The KL losses of a posterior and prior over ``[..., latents, classes]`` logits."""

    def __init__(self, dyn: torch.Tensor, rep: torch.Tensor, kl: torch.Tensor) -> None:
        self.dyn = dyn
        """``max(free, KL(sg(post) || prior))``, ``[...]``: trains the prior."""
        self.rep = rep
        """``max(free, KL(post || sg(prior)))``, ``[...]``: trains the representation."""
        self.kl = kl
        """The KL itself (summed over latents, no clipping), ``[...]``, for reporting."""


def _categorical_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """``KL(p || q)`` of categoricals, summed over the last two axes (latents, classes)."""
    p_log = torch.log_softmax(p_logits, -1)
    q_log = torch.log_softmax(q_logits, -1)
    return (p_log.exp() * (p_log - q_log)).sum((-2, -1))


def kl_balance(post_logits: torch.Tensor, prior_logits: torch.Tensor, free_nats: float) -> KLTerms:
    """DreamerV3's KL balancing with free bits: the dynamics loss
    ``max(free_nats, KL(sg(post) || prior))`` and the representation loss
    ``max(free_nats, KL(post || sg(prior)))`` (each KL summed over the latents; the world model
    loss weights them 0.5 and 0.1). Below ``free_nats`` a term is constant: no gradient.
    """
    dyn = _categorical_kl(post_logits.detach(), prior_logits)
    rep = _categorical_kl(post_logits, prior_logits.detach())
    free = torch.as_tensor(free_nats, dtype=dyn.dtype, device=dyn.device)
    return KLTerms(torch.maximum(dyn, free), torch.maximum(rep, free), dyn.detach())


def lambda_returns(
    rewards: torch.Tensor, values: torch.Tensor, discounts: torch.Tensor, lam: float
) -> torch.Tensor:
    """Lambda-returns of a trajectory of ``H + 1`` states, time on axis 0:
    ``R_H = v_H``, ``R_t = r_{t+1} + d_{t+1} ((1 - lam) v_{t+1} + lam R_{t+1})`` for ``t < H``.

    Args:
        rewards: ``[H + 1, ...]``, ``rewards[t]`` the reward on arriving at state ``t``
            (``rewards[0]`` unused).
        values: ``[H + 1, ...]`` the critic's values of the states.
        discounts: ``[H + 1, ...]`` ``gamma`` times the continue probability of each state
            (``discounts[0]`` unused).
        lam: lambda in [0, 1].

    Returns:
        ``[H, ...]``: the returns ``R_0 .. R_{H-1}``.
    """
    horizon = rewards.shape[0] - 1
    out = []
    last = values[-1]
    for t in reversed(range(horizon)):
        last = rewards[t + 1] + discounts[t + 1] * ((1.0 - lam) * values[t + 1] + lam * last)
        out.append(last)
    return torch.stack(out[::-1])

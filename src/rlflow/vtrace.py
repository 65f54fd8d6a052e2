"""V-trace off-policy value targets and policy-gradient advantages (IMPALA).

Reference: Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance Weighted
Actor-Learner Architectures" (ICML 2018), section 4.1, equation (1) and the remarks below it.

Two functions over one time-major batch of trajectory fragments: arrays are ``[T]`` (one
fragment) or ``[T, B]`` (B fragments side by side). Episode ends inside a fragment are carried by
``discounts``: pass ``gamma * (1 - terminated_t)``, so that nothing is bootstrapped across a
terminal step.

- :func:`vtrace`: numpy, the recursion in float64 whatever the input dtype: the reference;
- :func:`vtrace_torch`: the same on torch tensors, on their device and in their dtype, without
  gradients: what the learners run (`rlflow.algorithms.actor_learner`), tested against
  :func:`vtrace`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import torch

from rlflow.checks import check_number
from rlflow.errors import ConfigError

Array = npt.NDArray[Any]

_WHERE = "vtrace"


class VTraceReturns(NamedTuple):
    """Output of `vtrace`; every field has the shape of ``rewards`` (``[T]`` or ``[T, B]``)."""

    vs: Array
    """v_s, the V-trace value targets (regress V(x_s) towards them)."""
    pg_advantages: Array
    """rho^pg_s * (r_s + discount_s * v_{s+1} - V(x_s)), the policy-gradient advantages."""
    rhos: Array
    """pi(a_s|x_s) / mu(a_s|x_s), the importance ratios before any clipping."""


def _as_float64(name: str, value: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Return ``value`` as a float64 array, rejecting ranks other than 1 and 2."""
    array = np.asarray(value, dtype=np.float64)
    if array.ndim not in (1, 2):
        raise ConfigError(
            f"{_WHERE}: {name} must be time-major [T] or [T, B], got shape {array.shape}; "
            "transpose batch-major data with np.swapaxes(x, 0, 1)"
        )
    return array


def _check_threshold(name: str, value: float) -> float:
    """Return ``value`` if it is a positive number (``math.inf`` disables the clipping)."""
    try:
        return check_number(value, f"{_WHERE}: {name}", low=0, low_open=True)
    except ConfigError as err:  # the type is kept: ConfigTypeError stays a TypeError
        raise type(err)(f"{err} (math.inf for no clipping)") from None


def _out_dtype(*arrays: npt.ArrayLike) -> np.dtype[Any]:
    """float32 when every input is float32 (or narrower), else float64, as in `rlflow.returns`."""
    dtype = np.result_type(*(np.asarray(a).dtype for a in arrays), np.float32)
    return np.dtype(dtype) if dtype.kind == "f" else np.dtype(np.float64)


def vtrace(
    behaviour_logp: npt.ArrayLike,
    target_logp: npt.ArrayLike,
    rewards: npt.ArrayLike,
    values: npt.ArrayLike,
    bootstrap_value: npt.ArrayLike,
    discounts: npt.ArrayLike,
    *,
    clip_rho_threshold: float = 1.0,
    clip_pg_rho_threshold: float = 1.0,
    clip_c_threshold: float = 1.0,
) -> VTraceReturns:
    """V-trace targets ``vs`` and advantages for time-major fragments, Espeholt et al. eq. (1).

    With ``rho_t = min(rho_bar, pi_t / mu_t)`` and ``c_i = min(c_bar, pi_i / mu_i)``, where
    ``pi_t / mu_t = exp(target_logp_t - behaviour_logp_t)``, and with the per-step discount
    ``gamma_t = discounts_t``::

        delta_t = rho_t * (r_t + gamma_t * V(x_{t+1}) - V(x_t))
        v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{k=s}^{t-1} gamma_k c_k) * delta_t

    which is computed backwards as
    ``v_s - V(x_s) = delta_s + gamma_s * c_s * (v_{s+1} - V(x_{s+1}))`` with
    ``V(x_T) = v_T = bootstrap_value``. The policy-gradient advantage is
    ``rho^pg_s * (r_s + gamma_s * v_{s+1} - V(x_s))`` with ``rho^pg_s = min(pg_rho_bar,
    pi_s / mu_s)``. The paper's constant gamma is replaced by ``gamma_t`` so that a terminal
    step (``gamma_t = 0``) cuts the sums. On-policy with ``c_bar >= 1`` and ``rho_bar >= 1``,
    ``v_s`` is the n-step bootstrapped return to the fragment's end.

    Args:
        behaviour_logp: log mu(a_t|x_t) of the actions taken, shape ``[T]`` or ``[T, B]``.
        target_logp: log pi(a_t|x_t) under the policy being learned, same shape.
        rewards: r_t, same shape.
        values: V(x_t) under the learner's value function, same shape.
        bootstrap_value: V(x_T), a scalar for ``[T]`` inputs or shape ``[B]``.
        discounts: gamma * (1 - terminated_t), same shape as ``rewards``.
        clip_rho_threshold: rho_bar > 0 (``math.inf``: no clipping).
        clip_pg_rho_threshold: pg_rho_bar > 0, clips the ratios of the advantages.
        clip_c_threshold: c_bar > 0, the trace-cutting threshold.

    Returns:
        `VTraceReturns`; float32 when every input is float32, else float64.

    Raises:
        ConfigError: for mismatched shapes, ranks other than 1 or 2, or thresholds <= 0.

    Example:
        >>> out = vtrace([0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0], 0.0, [1.0, 1.0])
        >>> out.vs.tolist(), out.pg_advantages.tolist()
        ([2.0, 1.0], [2.0, 1.0])
    """
    rho_bar = _check_threshold("clip_rho_threshold", clip_rho_threshold)
    pg_rho_bar = _check_threshold("clip_pg_rho_threshold", clip_pg_rho_threshold)
    c_bar = _check_threshold("clip_c_threshold", clip_c_threshold)
    inputs = {
        "behaviour_logp": _as_float64("behaviour_logp", behaviour_logp),
        "target_logp": _as_float64("target_logp", target_logp),
        "rewards": _as_float64("rewards", rewards),
        "values": _as_float64("values", values),
        "discounts": _as_float64("discounts", discounts),
    }
    shape = inputs["rewards"].shape
    for name, array in inputs.items():
        if array.shape != shape:
            raise ConfigError(
                f"{_WHERE}: {name} has shape {array.shape} but rewards has shape {shape}; "
                "every per-step input must have the same [T] or [T, B] shape"
            )
    bootstrap = np.asarray(bootstrap_value, dtype=np.float64)
    if bootstrap.shape != shape[1:]:
        raise ConfigError(
            f"{_WHERE}: bootstrap_value has shape {bootstrap.shape}, expected {shape[1:]} "
            f"(rewards have shape {shape}: a scalar for [T], shape [B] for [T, B])"
        )
    log_rhos = inputs["target_logp"] - inputs["behaviour_logp"]
    rhos = np.exp(log_rhos)
    vs, pg_advantages = _vtrace_recursion(
        rhos,
        inputs["rewards"],
        inputs["values"],
        bootstrap,
        inputs["discounts"],
        (rho_bar, pg_rho_bar, c_bar),
    )
    dtype = _out_dtype(behaviour_logp, target_logp, rewards, values, bootstrap_value, discounts)
    return VTraceReturns(
        vs=vs.astype(dtype, copy=False),
        pg_advantages=pg_advantages.astype(dtype, copy=False),
        rhos=rhos.astype(dtype, copy=False),
    )


def _vtrace_recursion(
    rhos: npt.NDArray[np.float64],
    rewards: npt.NDArray[np.float64],
    values: npt.NDArray[np.float64],
    bootstrap: npt.NDArray[np.float64],
    discounts: npt.NDArray[np.float64],
    thresholds: tuple[float, float, float],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The backward recursion of `vtrace` on validated float64 arrays; returns (vs, pg_adv)."""
    rho_bar, pg_rho_bar, c_bar = thresholds
    # np.minimum(threshold, x) is x for an infinite threshold: no special case needed.
    clipped_rhos = np.minimum(rho_bar, rhos)
    clipped_cs = np.minimum(c_bar, rhos)
    next_values = np.concatenate([values[1:], bootstrap[np.newaxis]], axis=0)
    deltas = clipped_rhos * (rewards + discounts * next_values - values)
    vs_minus_v = np.empty_like(values)
    acc = np.zeros_like(bootstrap)
    for t in range(values.shape[0] - 1, -1, -1):
        acc = deltas[t] + discounts[t] * clipped_cs[t] * acc
        vs_minus_v[t] = acc
    vs = vs_minus_v + values
    next_vs = np.concatenate([vs[1:], bootstrap[np.newaxis]], axis=0)
    pg_advantages = np.minimum(pg_rho_bar, rhos) * (rewards + discounts * next_vs - values)
    return vs, pg_advantages


def vtrace_torch(
    behaviour_logp: torch.Tensor,
    target_logp: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    discounts: torch.Tensor,
    *,
    clip_rho_threshold: float = 1.0,
    clip_pg_rho_threshold: float = 1.0,
    clip_c_threshold: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`vtrace` on tensors: ``(vs, pg_advantages, rhos)``, no gradients, nothing copied
    to the host.

    Same arguments and equations as :func:`vtrace` (time-major ``[T]`` or ``[T, B]`` tensors,
    ``bootstrap_value`` a scalar or ``[B]``), computed on the inputs' device in ``values``'
    dtype; the inputs are detached. Thresholds are checked as in :func:`vtrace`; shapes are
    the caller's to get right (a mismatch raises torch's broadcasting error or gives wrong
    numbers, so the learners build them from one `rlflow.data.sequences.SequenceLayout`).

    >>> vs, adv, rhos = vtrace_torch(*(torch.tensor(x) for x in
    ...     ([0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0], 0.0, [1.0, 1.0])))
    >>> vs.tolist(), adv.tolist()
    ([2.0, 1.0], [2.0, 1.0])
    """
    rho_bar = _check_threshold("clip_rho_threshold", clip_rho_threshold)
    pg_rho_bar = _check_threshold("clip_pg_rho_threshold", clip_pg_rho_threshold)
    c_bar = _check_threshold("clip_c_threshold", clip_c_threshold)
    with torch.no_grad():
        dtype = values.dtype
        values = values.detach()
        rewards, discounts = rewards.detach().to(dtype), discounts.detach().to(dtype)
        bootstrap = bootstrap_value.detach().to(dtype)
        rhos = torch.exp(target_logp.detach().to(dtype) - behaviour_logp.detach().to(dtype))
        # clamp(max=inf) is the identity, so an infinite threshold needs no special case.
        clipped_rhos = rhos.clamp(max=rho_bar)
        discounted_cs = discounts * rhos.clamp(max=c_bar)
        next_values = torch.cat([values[1:], bootstrap.unsqueeze(0)], dim=0)
        deltas = clipped_rhos * (rewards + discounts * next_values - values)
        # One fused op per step (few kernel launches on a GPU, few calls on a CPU).
        acc = torch.zeros_like(bootstrap)
        backwards: list[torch.Tensor] = []
        for delta, discounted_c in zip(
            reversed(deltas.unbind(0)), reversed(discounted_cs.unbind(0)), strict=True
        ):
            acc = torch.addcmul(delta, discounted_c, acc)
            backwards.append(acc)
        vs_minus_v = torch.stack(backwards[::-1]) if backwards else torch.zeros_like(values)
        vs = vs_minus_v + values
        next_vs = torch.cat([vs[1:], bootstrap.unsqueeze(0)], dim=0)
        pg_advantages = rhos.clamp(max=pg_rho_bar) * (rewards + discounts * next_vs - values)
    return vs, pg_advantages, rhos

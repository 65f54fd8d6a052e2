"""Returns and advantage estimators as small pure numpy functions.

Every function works on one trajectory fragment: consecutive steps of a single episode, in time
order, of length ``T``. Whether to bootstrap past the fragment's end is the caller's decision:
pass ``bootstrap_value = V(s_T)`` when the fragment was cut off (rollout fragment end or time-limit
truncation) and ``0.0`` when the episode terminated.

References: Sutton & Barto, "Reinforcement Learning: An Introduction" (2018), ch. 7 (n-step
returns); Schulman et al., "High-Dimensional Continuous Control Using Generalized Advantage
Estimation" (ICLR 2016).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from rlflow.checks import check_int, check_number
from rlflow.data.sample_batch import (
    ADVANTAGES,
    EPS_ID,
    REWARDS,
    VALUE_TARGETS,
    VF_PREDS,
    SampleBatch,
)
from rlflow.errors import ConfigError

Array = npt.NDArray[Any]


class GAEResult(NamedTuple):
    """Output of `gae`: advantages and value-function targets, both shape ``(T,)``."""

    advantages: Array
    """A_t, the generalized advantage estimates."""
    value_targets: Array
    """A_t + V(s_t), the lambda-returns used as value-function targets."""


class NStepResult(NamedTuple):
    """Output of `n_step_targets`, all shape ``(T,)``.

    The n-step Q target of step t is
    ``returns[t] + discounts[t] * (1 - terminateds[t]) * max_a Q(next_obs[next_index[t]], a)``.
    """

    returns: Array
    """Discounted sum of the m_t <= n rewards from step t: sum_{k<m_t} gamma^k r_{t+k}."""
    next_index: npt.NDArray[np.int64]
    """t + m_t - 1: the last step in the window, whose next observation is bootstrapped from."""
    discounts: Array
    """gamma^{m_t}: the discount of the bootstrap value."""
    terminateds: npt.NDArray[np.bool_]
    """True where the window ends in a terminal state (the bootstrap value is then 0)."""


def _check_gamma(where: str, name: str, value: float) -> None:
    """Raise `ConfigError` unless ``0 <= value <= 1``."""
    check_number(value, f"{where}: {name}", low=0, high=1)


def _vector(where: str, name: str, value: npt.ArrayLike) -> Array:
    """Return ``value`` as a 1-D float array (float32 stays float32, others become float64)."""
    array = np.asarray(value)
    if array.ndim != 1:
        raise ConfigError(
            f"{where}: {name} must be 1-D (one trajectory fragment), got shape {array.shape}"
        )
    return array.astype(np.result_type(array.dtype, np.float32), copy=False)


def _discounted_cumsum(x: Array, discount: float, last: float) -> Array:
    """y_t = x_t + discount * y_{t+1}, with y_T = ``last``; accumulated in float64."""
    out = np.empty(x.shape[0], dtype=np.float64)
    acc = float(last)
    for t in range(x.shape[0] - 1, -1, -1):
        acc = float(x[t]) + discount * acc
        out[t] = acc
    return out.astype(x.dtype, copy=False)


def discounted_returns(
    rewards: npt.ArrayLike, gamma: float, *, bootstrap_value: float = 0.0
) -> Array:
    """Discounted return of every step of one trajectory fragment.

    ``G_t = r_t + gamma * G_{t+1}`` for ``t = T-1, ..., 0``, with ``G_T = bootstrap_value``;
    that is ``G_t = sum_{k=t}^{T-1} gamma^{k-t} r_k + gamma^{T-t} * bootstrap_value``.

    Args:
        rewards: shape ``(T,)``, rewards r_0 .. r_{T-1}.
        gamma: discount in [0, 1].
        bootstrap_value: V(s_T) if the fragment was cut off, 0.0 if the episode terminated.

    Returns:
        G, shape ``(T,)``; float32 for float32 rewards, else float64.

    Example:
        >>> discounted_returns([1.0, 1.0, 1.0], 0.5).tolist()
        [1.75, 1.5, 1.0]
    """
    _check_gamma("discounted_returns", "gamma", gamma)
    r = _vector("discounted_returns", "rewards", rewards)
    return _discounted_cumsum(r, gamma, bootstrap_value)


def gae(
    rewards: npt.ArrayLike,
    values: npt.ArrayLike,
    *,
    bootstrap_value: float,
    gamma: float,
    lam: float,
) -> GAEResult:
    """Generalized advantage estimation over one trajectory fragment.

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` with ``V_T = bootstrap_value``;
    ``A_t = delta_t + gamma * lam * A_{t+1}`` with ``A_T = 0``, i.e.
    ``A_t = sum_{k=t}^{T-1} (gamma * lam)^{k-t} delta_k``; ``value_targets_t = A_t + V_t``.

    ``lam = 1`` gives ``A_t = G_t - V_t`` (Monte-Carlo returns minus values); ``lam = 0`` gives
    the one-step TD errors ``A_t = delta_t``.

    Args:
        rewards: shape ``(T,)``.
        values: shape ``(T,)``, V(s_t) as predicted when acting.
        bootstrap_value: V(s_T) if the fragment was cut off, 0.0 if the episode terminated.
        gamma: discount in [0, 1].
        lam: GAE lambda in [0, 1].

    Example:
        >>> r = gae([1.0, 1.0], [0.5, 0.5], bootstrap_value=0.0, gamma=1.0, lam=1.0)
        >>> r.advantages.tolist(), r.value_targets.tolist()
        ([1.5, 0.5], [2.0, 1.0])
    """
    _check_gamma("gae", "gamma", gamma)
    _check_gamma("gae", "lam", lam)
    r = _vector("gae", "rewards", rewards)
    v = _vector("gae", "values", values)
    if r.shape != v.shape:
        raise ConfigError(
            f"gae: rewards has shape {r.shape} but values has shape {v.shape}; they must match"
        )
    dtype = np.result_type(r.dtype, v.dtype)
    v64 = v.astype(np.float64)
    next_values = np.append(v64[1:], float(bootstrap_value))
    deltas = r.astype(np.float64) + gamma * next_values - v64
    advantages = _discounted_cumsum(deltas, gamma * lam, 0.0)
    return GAEResult(
        advantages=advantages.astype(dtype, copy=False),
        value_targets=(advantages + v64).astype(dtype, copy=False),
    )


def gae_columns(
    rewards: Array,
    values: Array,
    ends: npt.NDArray[np.bool_],
    last_values: Array,
    *,
    gamma: float,
    lam: float,
) -> GAEResult:
    """`gae` over every episode fragment of a rollout at once: columns ``[T, N]`` of ``N``
    sub-envs, each cut into fragments at the rows ``ends`` marks (its last row must be one).

    ``last_values[t, n]`` is the bootstrap value after an end row (0.0 after a terminal step);
    other rows' are not read. Each element is computed with the same float64 operations, in
    the same order, as `gae` on that fragment with ``bootstrap_value=last_values[end]``, so the
    results are identical, as float32 ``[T, N]`` arrays; the sweep back in time is one numpy
    step per row, over all sub-envs.

    Example:
        >>> r = gae_columns(np.ones((2, 1)), np.full((2, 1), 0.5), np.array([[False], [True]]),
        ...                 np.zeros((2, 1)), gamma=1.0, lam=1.0)
        >>> r.advantages[:, 0].tolist(), r.value_targets[:, 0].tolist()
        ([1.5, 0.5], [2.0, 1.0])
    """
    _check_gamma("gae_columns", "gamma", gamma)
    _check_gamma("gae_columns", "lam", lam)
    if not (rewards.shape == values.shape == ends.shape == last_values.shape) or rewards.ndim != 2:
        raise ConfigError(
            f"gae_columns: rewards {rewards.shape}, values {values.shape}, ends {ends.shape} "
            f"and last_values {last_values.shape} must all have one shape [T, N]"
        )
    if rewards.shape[0] and not ends[-1].all():
        raise ConfigError("gae_columns: the last row must end every sub-env's fragment")
    v64 = values.astype(np.float64)
    next_values = np.empty_like(v64)
    next_values[:-1] = v64[1:]
    np.copyto(next_values, last_values, where=ends, casting="unsafe")
    deltas = rewards.astype(np.float64) + gamma * next_values - v64
    discount = gamma * lam
    advantages = np.empty_like(deltas)
    acc = np.zeros(deltas.shape[1], dtype=np.float64)
    zero = np.zeros_like(acc)
    for t in range(deltas.shape[0] - 1, -1, -1):
        # A fragment's sweep starts from 0.0 at its end row, as `_discounted_cumsum`'s does.
        acc = deltas[t] + discount * np.where(ends[t], zero, acc)
        advantages[t] = acc
    return GAEResult(
        advantages=advantages.astype(np.float32),
        value_targets=(advantages + v64).astype(np.float32),
    )


def compute_advantages(
    batch: SampleBatch,
    *,
    last_value: float,
    gamma: float,
    lam: float,
    use_gae: bool = True,
    use_critic: bool = True,
) -> SampleBatch:
    """Return a copy of a one-episode fragment with `ADVANTAGES` and `VALUE_TARGETS` added.

    - ``use_gae`` (needs ``use_critic`` and `VF_PREDS`): `gae` over `REWARDS` and `VF_PREDS`.
    - ``use_critic`` without GAE: ``G = discounted_returns(rewards, gamma, last_value)``,
      advantages ``G - V``, value targets ``G``.
    - neither: advantages ``G`` (REINFORCE), value targets all zero; `VF_PREDS` not needed.

    ``last_value`` is V(s_T) after the fragment's last step: 0.0 if that step terminated the
    episode. The new columns are float32. ``batch`` is not modified. Raises `ConfigError` if the
    batch spans several episodes (split it with `SampleBatch.split_by_episode` first) or lacks a
    needed column.
    """
    where = "compute_advantages"
    if use_gae and not use_critic:
        raise ConfigError(f"{where}: use_gae=True needs use_critic=True (GAE uses the critic)")
    needed = [REWARDS, VF_PREDS] if use_critic else [REWARDS]
    missing = [c for c in needed if c not in batch]
    if missing and batch.count > 0:
        raise ConfigError(f"{where}: batch lacks columns {missing}; columns are {sorted(batch)}")
    if EPS_ID in batch and np.unique(batch[EPS_ID]).size > 1:
        raise ConfigError(
            f"{where}: batch spans episodes {np.unique(batch[EPS_ID]).tolist()}; pass one "
            "episode fragment at a time (see SampleBatch.split_by_episode)"
        )
    out = batch.copy()
    if batch.count == 0:
        out[ADVANTAGES] = np.zeros(0, dtype=np.float32)
        out[VALUE_TARGETS] = np.zeros(0, dtype=np.float32)
        return out
    rewards = batch[REWARDS].astype(np.float64)
    if use_gae:
        advantages, targets = gae(
            rewards, batch[VF_PREDS], bootstrap_value=last_value, gamma=gamma, lam=lam
        )
    else:
        returns = discounted_returns(rewards, gamma, bootstrap_value=last_value)
        if use_critic:
            advantages, targets = returns - batch[VF_PREDS], returns
        else:
            advantages, targets = returns, np.zeros_like(returns)
    out[ADVANTAGES] = advantages.astype(np.float32)
    out[VALUE_TARGETS] = targets.astype(np.float32)
    return out


def n_step_targets(
    rewards: npt.ArrayLike, terminateds: npt.ArrayLike, gamma: float, n: int
) -> NStepResult:
    """N-step discounted rewards and bootstrap indices for one trajectory fragment (DQN).

    For each step t the window holds ``m_t = min(n, T - t, k_t - t + 1)`` steps, where ``k_t``
    is the first terminal step at or after t: it never runs past the fragment's end or past a
    terminal step. ``returns_t = sum_{k=0}^{m_t - 1} gamma^k r_{t+k}``,
    ``next_index_t = t + m_t - 1``, ``discounts_t = gamma^{m_t}`` and
    ``terminateds_t = terminateds[next_index_t]``. See `NStepResult` for the target.

    Example:
        >>> r = n_step_targets([1.0, 1.0, 1.0], [False, False, True], 0.5, 2)
        >>> r.returns.tolist(), r.next_index.tolist(), r.discounts.tolist()
        ([1.5, 1.5, 1.0], [1, 2, 2], [0.25, 0.25, 0.5])
    """
    where = "n_step_targets"
    _check_gamma(where, "gamma", gamma)
    check_int(n, f"{where}: n", low=1)
    r = _vector(where, "rewards", rewards)
    done = np.asarray(terminateds, dtype=bool)
    if done.shape != r.shape:
        raise ConfigError(
            f"{where}: terminateds has shape {done.shape} but rewards has shape {r.shape}"
        )
    size = r.shape[0]
    # The first terminal step at or after t (or the last step) bounds each window.
    stop = np.empty(size, dtype=np.int64)
    bound = size - 1
    for t in range(size - 1, -1, -1):
        if done[t]:
            bound = t
        stop[t] = bound
    next_index = np.minimum(np.arange(size, dtype=np.int64) + n - 1, stop)
    lengths = next_index - np.arange(size) + 1
    returns = np.zeros(size, dtype=np.float64)
    for k in range(n):
        in_window = lengths > k
        idx = np.minimum(np.arange(size) + k, size - 1)
        returns += np.where(in_window, gamma**k * r[idx].astype(np.float64), 0.0)
    return NStepResult(
        returns=returns.astype(r.dtype, copy=False),
        next_index=next_index,
        discounts=np.power(gamma, lengths.astype(np.float64)).astype(r.dtype, copy=False),
        terminateds=done[next_index] if size else np.zeros(0, dtype=bool),
    )

"""The learner stats of a plan's updates, and the policy lag they report, in the plan context.

Every operator that updates the learner hands its per-policy stats to :func:`record_learner_info`:
they become ``info["learner"]`` of the next result, and each policy's
``diff_num_grad_updates_vs_sampler_policy`` (the policy lag of the update, see
``rlflow.policy.policy``) is kept until :func:`pop_policy_lag` sums them up for the result
(``policy_lag_mean`` / ``policy_lag_max`` over the updates of the iteration).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlflow import flow
from rlflow.learner import POLICY_LAG
from rlflow.ops import keys

__all__ = ["pop_policy_lag", "record_learner_info"]

_LAGS = "_policy_lags"
"""``ctx.info`` key (private: not in results) of the lags recorded since the last result."""


def record_learner_info(stats: Mapping[str, Mapping[str, Any]], *, merge: bool = False) -> None:
    """Make ``stats`` (``{policy_id: learner stats}``) the context's ``info["learner"]`` (with
    ``merge``: update it per policy) and keep each policy's policy lag for the result."""
    info = flow.current_metrics().info
    # The per-policy dicts themselves (not copies): UpdateReplayPriorities takes the TD errors
    # out of them after the update was recorded.
    stats = dict(stats)
    info[keys.LEARNER_INFO] = {**info.get(keys.LEARNER_INFO, {}), **stats} if merge else stats
    lags = [float(s[POLICY_LAG]) for s in stats.values() if POLICY_LAG in s]
    if lags:
        info[_LAGS] = [*info.get(_LAGS, []), *lags]


def pop_policy_lag() -> dict[str, float | None]:
    """``{"policy_lag_mean": ..., "policy_lag_max": ...}`` over the updates recorded since the
    last call (None when none reported a lag), and forget them.

    >>> def update(lag: float) -> None:
    ...     record_learner_info({"p": {POLICY_LAG: lag}, "q": {}})
    >>> plan = flow.from_iterable([1.0, 3.0]).for_each(update).batch(2)
    >>> plan.for_each(lambda _: pop_policy_lag()).take(1)
    [{'policy_lag_mean': 2.0, 'policy_lag_max': 3.0}]
    """
    lags = flow.current_metrics().info.pop(_LAGS, [])
    if not lags:
        return {"policy_lag_mean": None, "policy_lag_max": None}
    return {"policy_lag_mean": sum(lags) / len(lags), "policy_lag_max": max(lags)}

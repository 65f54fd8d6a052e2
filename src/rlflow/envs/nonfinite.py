"""NaN and infinite numbers from envs, caught where they enter a run.

A NaN reward or observation that reaches a learner turns every weight NaN in one update, and
the run fails an iteration later somewhere unrelated (action sampling). The samplers check
every reward and every floating-point observation as it arrives, before an observation filter
or a rollout buffer sees it, with `finite_array` (under a microsecond for a step's small arrays;
numpy's elementwise check for large ones). What they do with a bad one is ``on_nonfinite``
(`rlflow.config.failures.ON_NONFINITE`): a `NonFiniteError` whose message `nonfinite_message`
writes, or the episode dropped (`rlflow.envs.vector.VectorEnv.drop_episodes`).

>>> all_finite(np.array([1.0, 2.0])), all_finite(np.array([1.0, np.nan]))
(True, False)
>>> all_finite(np.array([3e38, 3e38], dtype=np.float32))  # the sum overflows, the values do not
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "MAX_RESET_ATTEMPTS",
    "all_finite",
    "finite_array",
    "first_nonfinite",
    "nonfinite_message",
]

Array = npt.NDArray[Any]

_SMALL = 64
"""Float arrays up to this size are summed in Python (`finite_array`), larger ones by numpy."""

MAX_RESET_ATTEMPTS = 3
"""Resets in a row of one env whose first observation was not finite, before it is an error."""


def finite_array(array: Array) -> bool:
    """True when every number in the numpy ``array`` is finite (integer and boolean arrays
    always are): the samplers' per-step check, under a microsecond for a step's rewards or a
    classic-control observation batch."""
    if array.dtype.kind not in "fc":
        return True
    if array.size <= _SMALL and array.dtype.kind == "f":
        # NaN and infinities propagate through a sum (-inf + inf and an overflow raise), so a
        # finite sum proves every value finite; Python's fsum beats numpy's call overhead here.
        try:
            if math.isfinite(math.fsum(array.ravel().tolist())):
                return True
        except (ValueError, OverflowError):
            pass
    return bool(np.isfinite(array).all())


def all_finite(value: Any) -> bool:
    """True when every number in ``value`` (an array, a number, or a dict, tuple or list of
    them: structured observations) is finite; integer and boolean values always are."""
    if isinstance(value, np.ndarray) and value.dtype.kind != "O":
        return finite_array(value)
    if isinstance(value, Mapping):
        return all(all_finite(v) for v in value.values())
    if isinstance(value, tuple):
        return all(all_finite(v) for v in value)
    array = np.asarray(value)
    if array.dtype.kind == "O":
        return array.ndim == 0 or all(all_finite(v) for v in array.ravel())
    return finite_array(array)


def first_nonfinite(value: Any) -> float:
    """The first NaN or infinite number in ``value`` (which has one)."""
    array = np.asarray(value, dtype=np.float64).ravel()
    return float(array[np.flatnonzero(~np.isfinite(array))[0]])


def nonfinite_message(where: str, field: str, value: Any, episode_step: int) -> str:
    """The message of a `NonFiniteError` for ``field`` (e.g. ``"reward"``) of ``where`` (the
    env, worker and sub-env) at step ``episode_step`` of its episode.

    >>> nonfinite_message("env 'X', sub-env 0", "reward", np.nan, 301)[:73]
    "env 'X', sub-env 0: returned a non-finite reward (nan) at step 301 of its"
    """
    shown = first_nonfinite(value)
    return (
        f"{where}: returned a non-finite {field} ({shown}) at step {episode_step} of its "
        "episode. Rewards and observations must be finite numbers: fix the env (or a wrapper "
        "that computes them), or set on_nonfinite='skip' to drop such episodes (counted in "
        "results as num_nonfinite_episodes)"
    )

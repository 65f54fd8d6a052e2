"""Observation filters (RLlib's ``observation_filter``): ``"NoFilter"`` and ``"MeanStdFilter"``.

A `MeanStdFilter` keeps a running mean and standard deviation of every element of the
observations it sees and maps each observation ``x`` to ``clip((x - mean) / (std + epsilon),
-clip, clip)`` (``clip`` 10 and ``epsilon`` 1e-8, RLlib's values), as float32. The statistics
are `RunningStat`\\ s (count, mean and M2, the sum of squared deviations from the mean), updated
a batch at a time and merged exactly (Chan et al.'s parallel form of Welford's algorithm), so
merging the statistics of two parts of a data set gives those of the whole.

Each rollout worker holds one filter per policy (as RLlib does: a multi-agent worker filters
each agent's observations with the filter of the agent's policy). Besides its running
statistics a filter keeps a *delta*: the statistics of the observations seen since the delta
was last taken (RLlib's "buffer"). Once per training iteration the learner takes every remote
worker's delta, merges them into its own filter (`MeanStdFilter.apply_changes`) and sends its
filter back; a worker then keeps the learner's statistics plus its own delta since it was taken
(`MeanStdFilter.sync`), so no observation is counted twice or lost (see
`rlflow.ops.filters.SyncObservationFilters`).

A frozen filter (`MeanStdFilter.frozen_copy`, or a call with ``update=False``) normalizes
without learning: evaluation, `rlflow.Trainer.compute_actions` and exported policies
(`filter_to_json` / `filter_from_json`) use the learner's statistics as they are.

Observations must be a ``Box`` that is not an image: the image model divides pixels by 255
itself (`rlflow.models.nets.NatureCNN`), so normalized frames would reach it scaled wrongly;
`make_filter` refuses images, ``Discrete`` and nested spaces with a `ConfigError`. (The env
creator flattens Dict and Tuple observations into one Box before any filter sees them,
`rlflow.envs.flatten`, so those are filtered as that vector.)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.config.rollouts import OBSERVATION_FILTERS
from rlflow.errors import ConfigError

__all__ = [
    "CLIP",
    "EPSILON",
    "OBSERVATION_FILTERS",
    "MeanStdFilter",
    "RunningStat",
    "filter_from_json",
    "filter_to_json",
    "make_filter",
]

Array = npt.NDArray[Any]

CLIP = 10.0
"""Normalized observations are clipped to ``[-CLIP, CLIP]`` (RLlib's default)."""
EPSILON = 1e-8
"""Added to the standard deviation before dividing (RLlib's value)."""


class RunningStat:
    """Count ``n``, mean and ``m2`` (sum of squared deviations from the mean) per element.

    Args:
        shape: the shape of one observation.

    `push` adds a batch ``[B, *shape]``, `merge` another `RunningStat`; both use the exact
    pairwise update (Chan, Golub and LeVeque), in float64. ``var`` is ``m2 / (n - 1)`` (the
    unbiased variance, as RLlib's) and ``std`` its square root; with fewer than two samples
    there is no spread yet, and ``std`` is 1 (observations are only centred).

    >>> a, b, whole = RunningStat((1,)), RunningStat((1,)), RunningStat((1,))
    >>> a.push(np.array([[1.0], [2.0]])); b.push(np.array([[4.0]]))
    >>> whole.push(np.array([[1.0], [2.0], [4.0]]))
    >>> a.merge(b)
    >>> a.n, round(float(a.mean[0]), 6), bool(np.allclose(a.var, whole.var, rtol=1e-12))
    (3, 2.333333, True)
    """

    __slots__ = ("m2", "mean", "n", "shape")

    def __init__(self, shape: tuple[int, ...]) -> None:
        """No samples yet: ``n`` 0, mean and ``m2`` zeros."""
        self.shape = tuple(int(s) for s in shape)
        self.n = 0
        self.mean: Array = np.zeros(self.shape, dtype=np.float64)
        self.m2: Array = np.zeros(self.shape, dtype=np.float64)

    @staticmethod
    def batch_moments(batch: npt.ArrayLike) -> tuple[int, Array, Array]:
        """``(count, mean, m2)`` of a batch ``[B, *shape]`` (float64)."""
        x = np.asarray(batch, dtype=np.float64)
        count = x.shape[0]
        if count == 0:
            return 0, np.zeros(x.shape[1:]), np.zeros(x.shape[1:])
        mean = np.add.reduce(x, axis=0)
        mean /= count
        dev = x - mean
        dev *= dev
        return count, mean, np.add.reduce(dev, axis=0)

    def push(self, batch: npt.ArrayLike) -> None:
        """Add the samples of ``batch`` (shape ``[B, *shape]``)."""
        self.add_moments(*self.batch_moments(batch))

    def merge(self, other: RunningStat) -> None:
        """Add the samples summarized by ``other`` (same shape)."""
        if other.shape != self.shape:
            raise ConfigError(
                f"RunningStat.merge: shapes differ ({self.shape} and {other.shape}); filters of "
                "one policy must see observations of one shape"
            )
        self.add_moments(other.n, other.mean, other.m2)

    def add_moments(self, n_b: int, mean_b: Array, m2_b: Array) -> None:
        """Add ``n_b`` samples of mean ``mean_b`` and squared deviations ``m2_b``."""
        if n_b == 0:
            return
        n_a = self.n
        if n_a == 0:
            self.n, self.mean, self.m2 = int(n_b), np.array(mean_b), np.array(m2_b)
            return
        n = n_a + n_b
        delta = mean_b - self.mean
        self.mean += delta * (n_b / n)  # in place: copies never share these arrays
        self.m2 += m2_b
        delta *= delta
        delta *= n_a * n_b / n
        self.m2 += delta
        self.n = n

    @property
    def var(self) -> Array:
        """Unbiased variance ``m2 / (n - 1)``; ones with fewer than two samples."""
        if self.n < 2:
            return np.ones(self.shape, dtype=np.float64)
        out: Array = self.m2 / (self.n - 1)
        return out

    @property
    def std(self) -> Array:
        """Square root of `var`."""
        out: Array = np.sqrt(self.var)
        return out

    def copy(self) -> RunningStat:
        """An independent copy."""
        out = RunningStat(self.shape)
        out.n, out.mean, out.m2 = self.n, self.mean.copy(), self.m2.copy()
        return out

    def get_state(self) -> dict[str, Any]:
        """``{"n", "mean", "m2"}`` (plain numpy, picklable)."""
        return {"n": self.n, "mean": self.mean.copy(), "m2": self.m2.copy()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state`."""
        self.n = int(state["n"])
        self.mean = np.array(state["mean"], dtype=np.float64).reshape(self.shape)
        self.m2 = np.array(state["m2"], dtype=np.float64).reshape(self.shape)

    def __repr__(self) -> str:
        return f"RunningStat(shape={self.shape}, n={self.n})"


def normalize(obs: npt.ArrayLike, mean: Array, std: Array, clip: float, epsilon: float) -> Array:
    """``clip((obs - mean) / (std + epsilon), -clip, clip)`` as float32: the one formula of
    training, evaluation and exported policies (so their outputs are bit-identical)."""
    out: Array = np.asarray(obs, dtype=np.float64) - mean
    out /= std + epsilon
    np.minimum(out, clip, out=out)  # np.clip, at half its cost on small arrays
    np.maximum(out, -clip, out=out)
    return out.astype(np.float32)


class MeanStdFilter:
    """Normalizes batches of observations by their running mean and std; see the module.

    Args:
        shape: the shape of one observation.
        clip: bound of the normalized values (> 0).
        epsilon: added to the std before dividing (> 0).

    Called on a batch ``[B, *shape]`` it first adds the batch to its statistics (`running`
    and `delta`; not with ``update=False`` or when `frozen`), then returns it normalized
    (float32).
    """

    name = "MeanStdFilter"

    def __init__(
        self, shape: tuple[int, ...], *, clip: float = CLIP, epsilon: float = EPSILON
    ) -> None:
        """Empty statistics."""
        self.shape = tuple(int(s) for s in shape)
        self.clip = float(clip)
        self.epsilon = float(epsilon)
        self.running = RunningStat(self.shape)
        """Every observation this filter's statistics hold (the learner's, after a sync, plus
        this worker's since)."""
        self.delta = RunningStat(self.shape)
        """Observations seen here since the delta was last taken (`take_delta`)."""
        self.frozen = False
        """When true, calls never update the statistics."""

    def __call__(self, obs: npt.ArrayLike, *, update: bool = True) -> Array:
        """Normalize a batch ``[B, *shape]``, adding it to the statistics first (see class)."""
        x = np.asarray(obs, dtype=np.float64)
        if update and not self.frozen:
            moments = RunningStat.batch_moments(x)
            self.running.add_moments(*moments)
            self.delta.add_moments(*moments)
        running = self.running
        return normalize(x, running.mean, running.std, self.clip, self.epsilon)

    # ------------------------------------------------------------------ sync
    def take_delta(self) -> RunningStat:
        """The delta (observations since the last call), replaced by an empty one."""
        out, self.delta = self.delta, RunningStat(self.shape)
        return out

    def apply_changes(self, other: MeanStdFilter) -> None:
        """Learner side: add ``other``'s delta (a worker's new observations) to the running
        statistics (RLlib's ``apply_changes(other, with_buffer=False)``). This filter's own
        delta is unchanged."""
        self.running.merge(other.delta)

    def sync(self, other: MeanStdFilter) -> None:
        """Worker side: take ``other``'s running statistics (the learner's, merged) and add
        this filter's delta, the observations seen here that ``other`` does not hold yet."""
        running = other.running.copy()
        running.merge(self.delta)
        self.running = running

    # ------------------------------------------------------------------ copies and state
    def frozen_copy(self) -> MeanStdFilter:
        """A copy that normalizes with these statistics and never updates them."""
        out = self.copy()
        out.frozen = True
        return out

    def copy(self) -> MeanStdFilter:
        """An independent copy (statistics, delta and `frozen`)."""
        return copy.deepcopy(self)

    def get_state(self) -> dict[str, Any]:
        """The statistics and delta (plain numpy, picklable): what a checkpoint holds."""
        return {"running": self.running.get_state(), "delta": self.delta.get_state()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state` in place (samplers keep a reference to this filter)."""
        self.running.set_state(state["running"])
        self.delta.set_state(state["delta"])

    def __repr__(self) -> str:
        return f"MeanStdFilter(shape={self.shape}, n={self.running.n}, delta={self.delta.n})"


def make_filter(name: str, obs_space: Any, *, where: str = "") -> MeanStdFilter | None:
    """The filter ``name`` for observations of ``obs_space``: None for ``"NoFilter"``.

    ``"MeanStdFilter"`` needs a ``Box`` that is not an image (not 3-D); anything else is a
    `ConfigError` naming ``where`` (if given), the space and the reason.
    """
    if name == "NoFilter":
        return None
    where = f"{where}: " if where else ""
    if name != "MeanStdFilter":
        raise ConfigError(
            f"{where}observation_filter={name!r} is not one of {list(OBSERVATION_FILTERS)}"
        )
    if not isinstance(obs_space, spaces.Box):
        raise ConfigError(
            f"{where}observation_filter='MeanStdFilter' needs a Box observation space, got "
            f"{obs_space}; use observation_filter='NoFilter' (Discrete, Dict and Tuple "
            "observations are not normalized)"
        )
    if len(obs_space.shape) == 3:
        raise ConfigError(
            f"{where}observation_filter='MeanStdFilter' does not take image observations "
            f"({obs_space}): the image model divides pixels by 255 itself, so normalized "
            "frames would reach it wrongly scaled; use observation_filter='NoFilter'"
        )
    return MeanStdFilter(obs_space.shape)


def filter_to_json(obs_filter: MeanStdFilter | None) -> dict[str, Any]:
    """A frozen filter as strict JSON, for an exported policy: ``{"name": "NoFilter"}``, or the
    name, shape, count, mean, std (float64, flattened), clip and epsilon of a `MeanStdFilter`."""
    if obs_filter is None:
        return {"name": "NoFilter"}
    running = obs_filter.running
    mean, std = running.mean.ravel().tolist(), running.std.ravel().tolist()
    if not all(math.isfinite(v) for v in (*mean, *std)):
        raise ConfigError(
            "export: the observation filter's statistics are not finite (an observation was "
            "inf or nan); they cannot be exported"
        )
    return {
        "name": MeanStdFilter.name,
        "shape": list(obs_filter.shape),
        "count": running.n,
        "mean": mean,
        "std": std,
        "clip": obs_filter.clip,
        "epsilon": obs_filter.epsilon,
    }


class _FrozenMeanStd:
    """A `MeanStdFilter`'s normalization with fixed mean and std (an exported filter)."""

    def __init__(self, mean: Array, std: Array, clip: float, epsilon: float) -> None:
        self.mean, self.std, self.clip, self.epsilon = mean, std, clip, epsilon

    def __call__(self, obs: npt.ArrayLike, *, update: bool = False) -> Array:
        return normalize(obs, self.mean, self.std, self.clip, self.epsilon)

    def __repr__(self) -> str:
        return f"MeanStdFilter(shape={self.mean.shape}, frozen)"


def filter_from_json(spec: Mapping[str, Any] | None) -> Any:
    """The frozen filter `filter_to_json` wrote: a callable ``obs batch -> normalized batch``,
    or None for ``"NoFilter"`` (and for exports written before filters existed, ``spec``
    None). `ConfigError` for an unknown name or a malformed record."""
    if spec is None or spec.get("name") == "NoFilter":
        return None
    if spec.get("name") != MeanStdFilter.name:
        raise ConfigError(
            f"observation_filter {spec.get('name')!r} is not one of {list(OBSERVATION_FILTERS)}"
        )
    try:
        shape = tuple(int(s) for s in spec["shape"])
        mean = np.array(spec["mean"], dtype=np.float64).reshape(shape)
        std = np.array(spec["std"], dtype=np.float64).reshape(shape)
        return _FrozenMeanStd(mean, std, float(spec["clip"]), float(spec["epsilon"]))
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"observation_filter: bad MeanStdFilter record ({err!r})") from err

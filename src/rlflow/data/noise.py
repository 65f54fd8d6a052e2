"""A shared noise table: one flat float32 array of Gaussian noise, made once and read by index.

Evolution strategies (Salimans et al. 2017) and augmented random search (Mania et al. 2018)
perturb a policy's flat parameters ``theta`` by ``sigma * eps``, where ``eps`` is a slice of a
table of N(0, 1) noise that every process can read: ``table[i : i + dim]``. The driver makes
the table once from a fixed seed (:meth:`SharedNoiseTable.create`) and stores it once in the
object store (``flow.put``): on Ray each node then holds one copy, which every worker process
there maps read-only (zero copy); on the local backend the workers read the very array the
driver made. Each worker is handed the table's reference once (:func:`install_noise`, which
registers it in the worker's process under the table's key); from then on a perturbation is
named by its integer index alone, and a worker returns (index, returns, lengths), never noise.
The driver slices its own copy to form the update (:func:`weighted_noise_sum`).

:func:`noise_table_creations` counts the tables made in this process, so a test can assert
that a run made exactly one. A table stays registered for the life of the process (a later
run with the same seed and size reuses it; ``noise_size`` float32 entries: 40 MB per 10M).

It lives in ``data/``, beside the object-store references of ``data/refs.py``: the configs
check a table's size against the object store (:func:`check_noise_size`) and resolve without
torch, which ``rlflow.ops`` imports.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from rlflow import flow
from rlflow.checks import check_int
from rlflow.errors import ConfigError

__all__ = [
    "NOISE_BYTES_PER_ENTRY",
    "SharedNoiseTable",
    "antithetic_params",
    "check_noise_size",
    "install_noise",
    "installed_noise",
    "noise_memory_limit",
    "noise_rows",
    "noise_table_creations",
    "weighted_noise_sum",
]

NOISE_BYTES_PER_ENTRY: Final = 4
"""float32."""

_RAY_DEFAULT_STORE_FRACTION: Final = 0.3
"""Ray's object store takes 30% of the machine's memory by default."""

_lock = threading.Lock()
_creations = 0
_installed: dict[str, npt.NDArray[np.float32]] = {}
"""This process's tables by key (a worker process: the ones installed in it)."""


def noise_table_creations() -> int:
    """How many noise tables :meth:`SharedNoiseTable.create` made in this process so far."""
    return _creations


def noise_memory_limit() -> tuple[int, str]:
    """The most bytes a noise table may take, and what limits it.

    On a running Ray session: the smallest node object store (each node holds one copy); with
    no Ray running in this process (the local backend, or before Ray starts): 30% of this
    machine's physical memory, Ray's default object store size (and a sane share of the RAM a
    local run's one array takes).
    """
    nodes = flow.cluster_nodes() if flow.is_initialized() else None
    stores = [n.get("object_store_memory", 0.0) for n in nodes or []]
    stores = [s for s in stores if s > 0]
    if stores:
        return int(min(stores)), "the Ray object store of the smallest node"
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        total = 16 * 2**30
    return int(total * _RAY_DEFAULT_STORE_FRACTION), "30% of this machine's memory"


def check_noise_size(noise_size: int, where: str) -> None:
    """Raise `ConfigError` naming ``where`` (the config field) when a table of ``noise_size``
    float32 entries would not fit `noise_memory_limit`."""
    limit, what = noise_memory_limit()
    need = int(noise_size) * NOISE_BYTES_PER_ENTRY
    if need > limit:
        raise ConfigError(
            f"{where}={noise_size}: a noise table of {noise_size} float32 entries takes "
            f"{need / 2**20:.0f} MiB, more than {what} allows ({limit / 2**20:.0f} MiB); "
            f"lower it (at most {limit // NOISE_BYTES_PER_ENTRY}) or give Ray a larger "
            "object store (ray start --object-store-memory)"
        )


class SharedNoiseTable:
    """The driver's handle on a noise table: its array, its reference in the object store and
    the key workers find it under.

    Build it with :meth:`create`. Picklable handles are not needed: workers receive the
    reference once through :func:`install_noise` and are then sent indices only.

    >>> from rlflow import flow
    >>> flow.init(backend="local")
    >>> table = SharedNoiseTable.create(1000, seed=3)
    >>> table.get(10, 4).shape, table.size
    ((4,), 1000)
    >>> float(table.get(10, 4)[0]) == float(table.array[10])
    True
    >>> flow.shutdown()
    """

    def __init__(self, array: npt.NDArray[np.float32], ref: Any, key: str) -> None:
        """Keep a made table (use :meth:`create`)."""
        self.array = array
        """The table, float32, read-only."""
        self.ref = ref
        """Its reference in the object store (``flow.put``)."""
        self.key = key
        """The name workers register it under: ``"<seed>:<size>"`` (same key, same noise)."""

    @property
    def size(self) -> int:
        """Entries in the table."""
        return int(self.array.size)

    @classmethod
    def create(cls, size: int, *, seed: int, where: str = "noise_size") -> SharedNoiseTable:
        """Make ``size`` N(0, 1) float32 entries from ``seed`` and store them once.

        Raises `ConfigError` naming ``where`` when the table does not fit the object store
        (`noise_memory_limit`). Counts one creation (:func:`noise_table_creations`). A table
        with the same key already made in this process is reused (not made again): one array
        per process, however many runs or workers use it.
        """
        global _creations
        size = check_int(size, f"SharedNoiseTable: {where}", low=1)
        seed = check_int(seed, "SharedNoiseTable: seed", low=0)
        check_noise_size(size, where)
        key = f"{seed}:{size}"
        with _lock:
            array = _installed.get(key)
            if array is None:
                array = np.random.default_rng(seed).standard_normal(size, dtype=np.float32)
                array.flags.writeable = False
                _installed[key] = array
                _creations += 1
        return cls(array, flow.put(array), key)

    def sample_indices(self, rng: np.random.Generator, count: int, dim: int) -> npt.NDArray[Any]:
        """``count`` random start indices of slices of length ``dim`` (int64)."""
        if dim > self.size:
            raise ConfigError(
                f"the noise table holds {self.size} entries, fewer than the policy's "
                f"{dim} parameters; raise noise_size"
            )
        return rng.integers(0, self.size - dim + 1, size=count, dtype=np.int64)

    def get(self, index: int, dim: int) -> npt.NDArray[np.float32]:
        """``table[index : index + dim]`` (a read-only view)."""
        return self.array[index : index + dim]

    def __repr__(self) -> str:
        return f"SharedNoiseTable(key={self.key!r}, size={self.size})"


def install_noise(worker: Any, key: str, array: npt.NDArray[np.float32]) -> None:
    """Worker side: register ``array`` (the table's reference, resolved by the backend when it
    is passed as a call's argument) under ``key`` in this process. Use as
    ``handle.apply.remote(install_noise, table.key, table.ref)``: the array arrives as a
    read-only view of the node's object store (Ray), or as the driver's own array (local)."""
    del worker
    with _lock:
        _installed.setdefault(key, array)


def installed_noise(key: str) -> npt.NDArray[np.float32]:
    """The table registered under ``key`` in this process; `ConfigError` if none was."""
    try:
        return _installed[key]
    except KeyError:
        raise ConfigError(
            f"no noise table {key!r} was installed in this process: send it with "
            "install_noise before asking for evaluations"
        ) from None


def noise_rows(
    table: npt.NDArray[np.float32], indices: Iterable[int], dim: int
) -> npt.NDArray[np.float32]:
    """The slices ``table[i : i + dim]`` for ``indices`` as one ``[len(indices), dim]`` array
    (one fancy-indexing gather)."""
    idx = np.asarray(list(indices) if not isinstance(indices, np.ndarray) else indices)
    return table[idx[:, None] + np.arange(dim)[None, :]]


def weighted_noise_sum(
    table: npt.NDArray[np.float32],
    weights: npt.ArrayLike,
    indices: npt.ArrayLike,
    dim: int,
    *,
    chunk: int = 512,
) -> npt.NDArray[np.float64]:
    """``sum_i weights[i] * table[indices[i] : indices[i] + dim]`` in float64, computed in
    chunks of ``chunk`` slices (one gather and one matrix product each), as the driver forms an
    ES or ARS update.

    >>> t = np.arange(10, dtype=np.float32)
    >>> weighted_noise_sum(t, [1.0, -2.0], [0, 5], 3).tolist()
    [-10.0, -11.0, -12.0]
    """
    w = np.asarray(weights, dtype=np.float64)
    idx = np.asarray(indices, dtype=np.int64)
    out = np.zeros(dim, dtype=np.float64)
    for start in range(0, len(idx), chunk):
        rows = noise_rows(table, idx[start : start + chunk], dim)
        out += w[start : start + chunk] @ rows.astype(np.float64)
    return out


def antithetic_params(
    theta: npt.ArrayLike, table: npt.NDArray[np.float32], indices: npt.ArrayLike, stdev: float
) -> npt.NDArray[np.float32]:
    """The ``2 * len(indices)`` perturbed parameter vectors, pair by pair:
    ``[theta + stdev * eps_0, theta - stdev * eps_0, theta + stdev * eps_1, ...]`` with
    ``eps_i = table[indices[i] : indices[i] + dim]``.

    >>> t = np.arange(6, dtype=np.float32)
    >>> antithetic_params(np.zeros(2), t, [1, 4], 0.5).tolist()
    [[0.5, 1.0], [-0.5, -1.0], [2.0, 2.5], [-2.0, -2.5]]
    """
    th = np.asarray(theta, dtype=np.float32)
    eps = noise_rows(table, np.asarray(indices, dtype=np.int64), th.size) * np.float32(stdev)
    out = np.empty((2 * len(eps), th.size), dtype=np.float32)
    out[0::2] = th + eps
    out[1::2] = th - eps
    return out

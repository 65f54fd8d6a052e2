"""Replay shards as actors: `ReplayActor` and `create_replay_actors`.

A sharded replay buffer is a list of `ReplayActor` s, each holding one `ReplayBuffer` (or
`PrioritizedReplayBuffer`) of its share of the capacity. Each actor is a shard of a parallel
iterator whose stream is "replay forever": read it with
``flow.from_actors(actors).gather_async()`` and drop the Nones (a shard replays None while it
holds fewer than ``learning_starts`` transitions). Rollouts go in with ``add_batch``; TD errors
come back with ``update_priorities``. Replay shards are cheap and run with ``num_cpus=0``, as in
Ape-X (Horgan et al., "Distributed Prioritized Experience Replay", ICLR 2018).

Each replayed batch's `BATCH_INDEXES` are tagged with the shard:
``shard_index * SHARD_STRIDE + slot``; `split_shard_indexes` undoes it, and
`ReplayActor.update_priorities` takes the tagged indexes as they are.

Example:
    >>> from rlflow import flow
    >>> from rlflow.data.sample_batch import REWARDS, SampleBatch
    >>> flow.init(backend="local")
    >>> actors = create_replay_actors(2, 100, learning_starts=4, num_items=3, seed=0)
    >>> replays = flow.from_actors(actors).gather_async()
    >>> next(replays) is None
    True
    >>> _ = [flow.get(a.add_batch.remote(SampleBatch({REWARDS: [1.0, 2.0]}))) for a in actors]
    >>> next(b for b in replays if b is not None).count
    3
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow import flow
from rlflow.checks import check_int
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch, from_multi_agent_if_single
from rlflow.errors import ConfigError
from rlflow.flow import ParallelIteratorWorker
from rlflow.replay.buffers import (
    BATCH_INDEXES,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    replay_forever,
)

IntArray = npt.NDArray[np.int64]

SHARD_STRIDE = 1 << 40
"""Tagged batch index = ``shard_index * SHARD_STRIDE + slot``; larger than any capacity."""


def split_shard_indexes(indexes: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    """Split tagged `BATCH_INDEXES` into ``(shard indexes, slots within the shard)``.

    Example:
        >>> shards, slots = split_shard_indexes([5, SHARD_STRIDE + 7])
        >>> shards.tolist(), slots.tolist()
        ([0, 1], [5, 7])
    """
    idx = np.asarray(indexes, dtype=np.int64)
    return idx // SHARD_STRIDE, idx % SHARD_STRIDE


def _make_buffer(
    where: str,
    capacity: int,
    *,
    prioritized: bool,
    alpha: float,
    beta: float,
    learning_starts: int,
    num_items: int,
    seed: int | None,
) -> ReplayBuffer:
    """Build the shard's buffer, checking every argument (raises `ConfigError`)."""
    check_int(learning_starts, f"{where}: learning_starts", low=0)
    check_int(num_items, f"{where}: num_items", low=1)
    if prioritized:
        return PrioritizedReplayBuffer(capacity, alpha=alpha, beta=beta, seed=seed)
    return ReplayBuffer(capacity, seed=seed)


class ReplayActor(ParallelIteratorWorker):
    """One shard of a sharded replay buffer; its stream replays forever.

    Args:
        capacity: transitions kept by this shard, >= 1.
        prioritized: use a `PrioritizedReplayBuffer` (else uniform `ReplayBuffer`).
        alpha: priority exponent in [0, 1] (prioritized only).
        beta: importance-sampling exponent in [0, 1] (prioritized only).
        learning_starts: the stream yields None until this shard holds this many transitions
            (and while it is empty); consumers filter the Nones out.
        num_items: rows per replayed batch, >= 1.
        seed: seed of the sampling RNG.
        shard_index: this shard's number, >= 0, used to tag `BATCH_INDEXES`.

    Stream item: ``SampleBatch | None``: a fresh ``num_items``-row sample (with
    `BATCH_INDEXES` tagged by shard, and `WEIGHTS` when prioritized) each time it is read.
    """

    def __init__(
        self,
        capacity: int,
        *,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        learning_starts: int = 0,
        num_items: int = 32,
        seed: int | None = None,
        shard_index: int = 0,
    ) -> None:
        """Create the shard's empty buffer."""
        super().__init__(self._replay_forever, repeat=False)
        self.shard_index = check_int(shard_index, "ReplayActor: shard_index", low=0)
        self.buffer = _make_buffer(
            "ReplayActor",
            capacity,
            prioritized=prioritized,
            alpha=alpha,
            beta=beta,
            learning_starts=learning_starts,
            num_items=num_items,
            seed=seed,
        )
        self.learning_starts = int(learning_starts)
        self.num_items = int(num_items)

    def _replay_forever(self) -> Iterator[SampleBatch | None]:
        replays = replay_forever(
            self.buffer, num_items=self.num_items, learning_starts=self.learning_starts
        )
        offset = self.shard_index * SHARD_STRIDE
        for batch in replays:
            if batch is not None:
                batch[BATCH_INDEXES] = batch[BATCH_INDEXES] + offset
            yield batch

    def add_batch(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Add ``batch`` to this shard (a `MultiAgentBatch` only if it holds just the default
        policy's experience)."""
        single = from_multi_agent_if_single(batch)
        if not isinstance(single, SampleBatch):
            raise ConfigError(
                f"ReplayActor.add_batch: got {single!r}; a replay shard stores single-agent "
                "SampleBatches (use one shard set per policy)"
            )
        self.buffer.add(single)

    def update_priorities(self, indexes: npt.ArrayLike, priorities: npt.ArrayLike) -> None:
        """Set priorities of rows given by their tagged `BATCH_INDEXES` from this shard.

        Does nothing for a uniform shard, so one plan serves both kinds. Raises `ConfigError`
        for an index of another shard.
        """
        if not isinstance(self.buffer, PrioritizedReplayBuffer):
            return
        shards, slots = split_shard_indexes(indexes)
        if shards.size and np.any(shards != self.shard_index):
            other = int(shards[shards != self.shard_index][0])
            raise ConfigError(
                f"ReplayActor.update_priorities: an index belongs to shard {other}, but this is "
                f"shard {self.shard_index}; send each batch's priorities to the shard that "
                "replayed it (flow's current_actor)"
            )
        self.buffer.update_priorities(slots, priorities)

    def stats(self) -> dict[str, float]:
        """The buffer's `ReplayBuffer.stats` plus ``shard_index`` and ``learning_starts``."""
        out = self.buffer.stats()
        out.update(shard_index=float(self.shard_index), learning_starts=self.learning_starts)
        return out

    def get_state(self) -> dict[str, Any]:
        """The buffer's state, for checkpoints."""
        return self.buffer.get_state()

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore the buffer from `get_state` output."""
        self.buffer.set_state(state)


def create_replay_actors(
    num_shards: int,
    capacity: int,
    *,
    prioritized: bool = False,
    alpha: float = 0.6,
    beta: float = 0.4,
    learning_starts: int = 0,
    num_items: int = 32,
    seed: int | None = None,
) -> list[Any]:
    """Start ``num_shards`` `ReplayActor` s (``num_cpus=0``) sharing ``capacity``.

    Shard i gets ``capacity // num_shards`` transitions, plus one for the first
    ``capacity % num_shards`` shards; ``learning_starts`` (a total) is split the same way,
    rounded up; shard i is seeded ``seed + i``. Every argument is checked before any actor
    starts (`ConfigError`). Returns the actor handles, in shard order.
    """
    start = replay_actor_starter(
        num_shards,
        capacity,
        prioritized=prioritized,
        alpha=alpha,
        beta=beta,
        learning_starts=learning_starts,
        num_items=num_items,
        seed=seed,
    )
    return [start(i) for i in range(num_shards)]


def replay_actor_starter(
    num_shards: int,
    capacity: int,
    *,
    prioritized: bool = False,
    alpha: float = 0.6,
    beta: float = 0.4,
    learning_starts: int = 0,
    num_items: int = 32,
    seed: int | None = None,
) -> Callable[[int], Any]:
    """Check the arguments of `create_replay_actors` (`ConfigError`); return the function that
    starts shard i (of ``num_shards``) empty, as `create_replay_actors` describes it."""
    where = "create_replay_actors"
    shards = check_int(num_shards, f"{where}: num_shards", low=1)
    total = check_int(capacity, f"{where}: capacity", low=1)
    if total < shards:
        raise ConfigError(
            f"{where}: capacity={total} must be >= num_shards={shards} (one transition "
            "per shard at least)"
        )
    starts = -(-check_int(learning_starts, f"{where}: learning_starts", low=0) // shards)
    kwargs: dict[str, Any] = {"prioritized": prioritized, "alpha": alpha, "beta": beta}
    kwargs.update(learning_starts=starts, num_items=num_items)
    _make_buffer(where, 1, seed=None, **kwargs)  # rejects bad values here, not in an actor
    remote_cls = flow.remote(ReplayActor).options(num_cpus=0)

    def start(i: int) -> Any:
        return remote_cls.remote(
            total // shards + (i < total % shards),
            shard_index=i,
            seed=None if seed is None else seed + i,
            **kwargs,
        )

    return start

"""Replay shards as actors: `ReplayShardSpec`, `ReplayActor` and `create_replay_actors`.

A sharded replay buffer is a list of `ReplayActor` s, each holding one `ReplayBuffer` (or
`PrioritizedReplayBuffer`) of its share of the capacity. One `ReplayShardSpec` (checked when
it is made) describes them all; each actor takes it and its shard index. A spec with a
``sequence_length`` makes shards of sequences (`rlflow.replay.SequenceReplayBuffer`,
R2D2's recurrent replay): they fold the sampled batches they get into sequences and replay
whole sequences. Each actor is a shard
of a parallel iterator whose stream is "replay forever": read it with
``flow.from_actors(actors).gather_async()`` and drop the Nones (a shard replays None while it
holds fewer than its share of ``learning_starts`` transitions). Rollouts go in with
``add_batch``; TD errors come back with ``update_priorities``. Replay shards are cheap and run
with ``num_cpus=0``, as in Ape-X (Horgan et al., "Distributed Prioritized Experience Replay",
ICLR 2018).

Each replayed batch's `BATCH_INDEXES` are tagged with the shard:
``shard_index * SHARD_STRIDE + slot``; `split_shard_indexes` undoes it, and
`ReplayActor.update_priorities` takes the tagged indexes as they are.

Example:
    >>> from rlflow import flow
    >>> from rlflow.data.sample_batch import REWARDS, SampleBatch
    >>> flow.init(backend="local")
    >>> spec = ReplayShardSpec(num_shards=2, capacity=100, learning_starts=4, num_items=3, seed=0)
    >>> actors = create_replay_actors(spec)
    >>> replays = flow.from_actors(actors).gather_async()
    >>> next(replays) is None
    True
    >>> _ = [flow.get(a.add_batch.remote(SampleBatch({REWARDS: [1.0, 2.0]}))) for a in actors]
    >>> next(b for b in replays if b is not None).count
    3
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow import flow
from rlflow.checks import check_bool, check_int, check_type
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch, from_multi_agent_if_single
from rlflow.errors import ConfigError
from rlflow.flow import ParallelIteratorWorker
from rlflow.replay.buffers import (
    BATCH_INDEXES,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    SequenceReplayBuffer,
    replay_forever,
)

__all__ = [
    "SHARD_STRIDE",
    "ReplayActor",
    "ReplayShardSpec",
    "create_replay_actors",
    "replay_actor_starter",
    "split_shard_indexes",
]

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


@dataclass(frozen=True, kw_only=True)
class ReplayShardSpec:
    """The settings of a sharded replay buffer, over all its shards.

    Checked when made (`ConfigError` naming the argument), so a bad value fails before any
    actor starts; the shares of shard i are `shard_capacity`, `shard_learning_starts` and
    `shard_seed`.
    """

    num_shards: int
    """Shards (`ReplayActor` s), >= 1."""
    capacity: int
    """Transitions (env steps) kept over all shards, >= ``num_shards`` (times
    ``sequence_length``): shard i keeps ``capacity // num_shards``, plus one for the first
    ``capacity % num_shards`` shards."""
    prioritized: bool = False
    """Prioritized shards (`PrioritizedReplayBuffer`), else uniform ones (`ReplayBuffer`)."""
    alpha: float = 0.6
    """Priority exponent in [0, 1] (prioritized only)."""
    beta: float = 0.4
    """Importance-sampling exponent in [0, 1] (prioritized only)."""
    learning_starts: int = 0
    """Transitions stored over all shards before replay starts, >= 0: each shard's stream
    yields None until the shard holds its share (``learning_starts / num_shards``, rounded
    up), and while it is empty."""
    num_items: int = 32
    """Rows per replayed batch, >= 1 (sequences, with a ``sequence_length``)."""
    seed: int | None = None
    """Shard i's sampling RNG is seeded ``seed + i`` (None: fresh entropy)."""
    sequence_length: int | None = None
    """Steps per stored sequence, >= 1: shards of sequences (`SequenceReplayBuffer`, always
    prioritized: ``prioritized`` False replays them uniformly, alpha 0); None: transitions."""

    def __post_init__(self) -> None:
        where = "create_replay_actors"
        shards = check_int(self.num_shards, f"{where}: num_shards", low=1)
        total = check_int(self.capacity, f"{where}: capacity", low=1)
        if total < shards:
            raise ConfigError(
                f"{where}: capacity={total} must be >= num_shards={shards} (one transition "
                "per shard at least)"
            )
        check_bool(self.prioritized, f"{where}: prioritized")
        check_int(self.learning_starts, f"{where}: learning_starts", low=0)
        check_int(self.num_items, f"{where}: num_items", low=1)
        if self.sequence_length is not None:
            length = check_int(self.sequence_length, f"{where}: sequence_length", low=1)
            if total < shards * length:
                raise ConfigError(
                    f"{where}: capacity={total} must be >= num_shards * sequence_length = "
                    f"{shards * length} (one sequence per shard at least)"
                )
        if self.prioritized:  # the buffer's own checks of alpha and beta, here, not in an actor
            PrioritizedReplayBuffer(1, alpha=self.alpha, beta=self.beta)

    def shard_capacity(self, shard_index: int) -> int:
        """Transitions shard ``shard_index`` keeps (its share of ``capacity``)."""
        return self.capacity // self.num_shards + (shard_index < self.capacity % self.num_shards)

    @property
    def shard_learning_starts(self) -> int:
        """Items each shard holds before it replays: ``learning_starts / num_shards``
        transitions, rounded up (divided by ``sequence_length`` and rounded up again for
        shards of sequences)."""
        steps = -(-self.learning_starts // self.num_shards)
        return -(-steps // (self.sequence_length or 1))

    def shard_seed(self, shard_index: int) -> int | None:
        """The seed of shard ``shard_index``'s sampling RNG: ``seed + shard_index``."""
        return None if self.seed is None else self.seed + shard_index


class ReplayActor(ParallelIteratorWorker):
    """One shard of a sharded replay buffer; its stream replays forever.

    Args:
        spec: the sharded buffer's settings; this shard keeps its shares of them.
        shard_index: this shard's number, in ``[0, spec.num_shards)``, used to tag
            `BATCH_INDEXES`.

    Stream item: ``SampleBatch | None``: a fresh ``spec.num_items``-row sample (with
    `BATCH_INDEXES` tagged by shard, and `WEIGHTS` when prioritized) each time it is read;
    None until the shard holds ``spec.shard_learning_starts`` transitions (and while it is
    empty): consumers filter the Nones out.
    """

    def __init__(self, spec: ReplayShardSpec, shard_index: int = 0) -> None:
        """Create the shard's empty buffer."""
        super().__init__(self._replay_forever, repeat=False)
        self.spec = check_type(spec, "ReplayActor(spec)", ReplayShardSpec, "a ReplayShardSpec")
        """The settings of the whole sharded buffer."""
        self.shard_index = check_int(
            shard_index, "ReplayActor: shard_index", low=0, high=spec.num_shards - 1
        )
        self.buffer = _shard_buffer(spec, shard_index)
        self.learning_starts = spec.shard_learning_starts
        """Items (transitions or sequences) this shard holds before it replays."""
        self.num_items = spec.num_items

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


def _shard_buffer(spec: ReplayShardSpec, shard_index: int) -> ReplayBuffer:
    """Shard ``shard_index``'s empty buffer: of sequences, prioritized or uniform."""
    capacity, seed = spec.shard_capacity(shard_index), spec.shard_seed(shard_index)
    if spec.sequence_length is not None:
        alpha = spec.alpha if spec.prioritized else 0.0
        return SequenceReplayBuffer(
            capacity, sequence_length=spec.sequence_length, alpha=alpha, beta=spec.beta, seed=seed
        )
    if spec.prioritized:
        return PrioritizedReplayBuffer(capacity, alpha=spec.alpha, beta=spec.beta, seed=seed)
    return ReplayBuffer(capacity, seed=seed)


def create_replay_actors(spec: ReplayShardSpec) -> list[Any]:
    """Start ``spec.num_shards`` `ReplayActor` s (``num_cpus=0``), empty, sharing
    ``spec.capacity`` (see `ReplayShardSpec` for each shard's shares). Returns the actor
    handles, in shard order."""
    start = replay_actor_starter(spec)
    return [start(i) for i in range(spec.num_shards)]


def replay_actor_starter(spec: ReplayShardSpec) -> Callable[[int], Any]:
    """The function that starts shard i of ``spec`` empty, as `create_replay_actors` does."""
    check_type(spec, "create_replay_actors(spec)", ReplayShardSpec, "a ReplayShardSpec")
    remote_cls = flow.remote(ReplayActor).options(num_cpus=0)

    def start(i: int) -> Any:
        return remote_cls.remote(spec, i)

    return start

"""`MultiAgentReplayBuffer`: one replay buffer per policy, fed and sampled together."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy.typing as npt

from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch
from rlflow.errors import ConfigError
from rlflow.replay.buffers import PrioritizedReplayBuffer, ReplayBuffer

__all__ = ["MultiAgentReplayBuffer"]

logger = logging.getLogger(__name__)


class MultiAgentReplayBuffer:
    """A replay buffer per policy id, each made by ``make_buffer()`` on first use.

    `add` splits a `MultiAgentBatch` by policy (a `SampleBatch` is ``default_policy``'s);
    `sample` draws ``num_items`` rows from the buffer of every policy seen so far and returns
    them as one `MultiAgentBatch` counting ``num_items`` env steps. ``len()`` is the size of the
    smallest policy buffer (0 before any add), so ``learning_starts`` waits until every policy
    has that many rows. The replay ops (`rlflow.ops.StoreToReplayBuffer`, `rlflow.ops.replay`,
    `rlflow.ops.UpdateReplayPriorities`) accept it wherever they accept a `ReplayBuffer`.

    Example:
        >>> buf = MultiAgentReplayBuffer(lambda: ReplayBuffer(10, seed=0))
        >>> buf.add(MultiAgentBatch({"a": SampleBatch({"x": [1, 2]}),
        ...                          "b": SampleBatch({"x": [3]})}, env_steps_count=2))
        >>> out = buf.sample(4)
        >>> sorted(out.policy_batches), out.count, len(buf)
        (['a', 'b'], 4, 1)
    """

    def __init__(self, make_buffer: Callable[[], ReplayBuffer], *, steps_per_item: int = 1) -> None:
        """Keep the factory; buffers are made per policy on first use. ``steps_per_item``:
        env steps one item of the policy buffers holds (a `SequenceReplayBuffer`'s sequence
        length), which the replay operators count ``train_batch_size`` and
        ``learning_starts`` in."""
        if not callable(make_buffer):
            raise ConfigError(
                f"MultiAgentReplayBuffer(make_buffer={make_buffer!r}) must be a zero-argument "
                "function returning a ReplayBuffer"
            )
        self._make = make_buffer
        self.buffers: dict[str, ReplayBuffer] = {}
        """The buffer of each policy seen so far."""
        self.steps_per_item = int(steps_per_item)
        """Env steps one item of the policy buffers holds (1: transitions)."""

    @property
    def prioritized(self) -> bool:
        """True if the policy buffers are `PrioritizedReplayBuffer` s."""
        return any(isinstance(b, PrioritizedReplayBuffer) for b in self.buffers.values())

    def __len__(self) -> int:
        """Rows in the smallest policy buffer (0 before any add)."""
        return min((len(b) for b in self.buffers.values()), default=0)

    @property
    def num_added(self) -> int:
        """Rows added to the policy buffer that got the fewest (0 before any add)."""
        return min((b.num_added for b in self.buffers.values()), default=0)

    def __repr__(self) -> str:
        sizes = {pid: len(b) for pid, b in self.buffers.items()}
        return f"MultiAgentReplayBuffer({sizes})"

    def buffer(self, policy_id: str) -> ReplayBuffer:
        """The buffer of ``policy_id``, made now if new."""
        buf = self.buffers.get(policy_id)
        if buf is None:
            buf = self._make()
            if not isinstance(buf, ReplayBuffer):
                raise ConfigError(
                    f"MultiAgentReplayBuffer: make_buffer() returned {buf!r}, not a ReplayBuffer"
                )
            self.buffers[policy_id] = buf
        return buf

    def add(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Add each policy's rows to its buffer."""
        for pid, rows in batch.as_multi_agent().policy_batches.items():
            if rows.count:
                self.buffer(pid).add(rows)

    def sample(self, num_items: int, beta: float | None = None) -> MultiAgentBatch:
        """``num_items`` rows per policy (prioritized buffers use ``beta``), counting
        ``num_items * steps_per_item`` env steps."""
        if not self.buffers:
            raise ConfigError("MultiAgentReplayBuffer.sample: the buffer is empty; add first")
        out: dict[str, SampleBatch] = {}
        for pid, buf in self.buffers.items():
            if isinstance(buf, PrioritizedReplayBuffer):
                out[pid] = buf.sample(num_items, beta=beta)
            else:
                out[pid] = buf.sample(num_items)
        return MultiAgentBatch(out, num_items * self.steps_per_item)

    def update_priorities(
        self,
        indexes: npt.ArrayLike,
        priorities: npt.ArrayLike,
        policy_id: str = DEFAULT_POLICY_ID,
    ) -> None:
        """Set priorities of ``policy_id``'s rows (ignored for uniform buffers)."""
        buf = self.buffers.get(policy_id)
        if buf is None:
            raise ConfigError(
                f"MultiAgentReplayBuffer.update_priorities: no buffer for policy {policy_id!r}; "
                f"buffers exist for {sorted(self.buffers)}"
            )
        if isinstance(buf, PrioritizedReplayBuffer):
            buf.update_priorities(indexes, priorities)

    def stats(self) -> dict[str, dict[str, float]]:
        """Each policy buffer's `ReplayBuffer.stats`."""
        return {pid: buf.stats() for pid, buf in self.buffers.items()}

    def get_state(self) -> dict[str, Any]:
        """Each policy buffer's state."""
        return {pid: buf.get_state() for pid, buf in self.buffers.items()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`get_state`."""
        for pid, buf_state in state.items():
            self.buffer(pid).set_state(buf_state)

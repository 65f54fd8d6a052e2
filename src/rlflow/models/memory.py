"""What a policy with memory carries between steps, as the samplers and the batches see it.

A recurrent model's state travels as arrays. A sampler asks its policy for a memory
(`rlflow.policy.TorchPolicy.memory`): a `Memory` of one row per sub-env (or agent) that holds
each row's state, previous action and previous reward, gives them to the policy's step
(`RecurrentInputs`), takes the step's new state, goes back to the initial inputs when an episode
starts, and writes the inputs of every sampled row into the batch's columns (`state_in_key`,
``prev_actions``, ``prev_rewards``); its ``max_seq_len`` is how the sampler cuts episodes into
sequences (`rlflow.data.sequences.cut_sequences`). A policy without memory gives a `NoMemory`,
which does none of it: the samplers never ask which one they hold. The policy's step returns
the next state under the keys `state_out_key` names. The recurrent models are
`rlflow.models.recurrent`; nothing here needs torch, so the rollout workers' modules import
without it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import numpy.typing as npt

__all__ = [
    "AnyMemory",
    "Memory",
    "MemoryRow",
    "NoMemory",
    "RecurrentInputs",
    "no_previous_action",
    "state_in_key",
    "state_out_key",
    "stored_state",
]

Array = npt.NDArray[Any]

_PREV_ACTIONS, _PREV_REWARDS = "prev_actions", "prev_rewards"  # `rlflow.data.sample_batch`'s


class RecurrentInputs(NamedTuple):
    """What a policy with memory acts from, besides the observations (`TorchPolicy.
    compute_actions` and ``value`` take it as ``memory``), one row per observation."""

    state: Sequence[Any] | None = None
    """The model's state tensors as arrays, as `TorchPolicy.initial_state` gives them (None:
    the initial state)."""
    prev_actions: Any = None
    """The previous actions ``[B, ...]`` (None: not given; read if the model uses them)."""
    prev_rewards: Any = None
    """The previous rewards ``[B]`` (None: not given)."""


class MemoryRow(NamedTuple):
    """One row's inputs of a policy with memory: its state tensors (no batch axis), previous
    action and previous reward."""

    state: list[Array]
    prev_action: Array
    prev_reward: float


def state_in_key(k: int) -> str:
    """The batch column of state tensor ``k`` at a row: ``"state_in_0"``, ``"state_in_1"``..."""
    return f"state_in_{k}"


def state_out_key(k: int) -> str:
    """The key of state tensor ``k`` after a step in what `TorchPolicy.compute_actions`
    returns: ``"state_out_0"``, ``"state_out_1"``..."""
    return f"state_out_{k}"


def stored_state(columns: Mapping[str, Any], key: Callable[[int], str] = state_in_key) -> list[Any]:
    """The state columns of a batch (arrays or tensors), ``state_in_0``, ``state_in_1``...
    in order (with ``key=state_out_key``: the state after a step, in a policy's outputs);
    ``[]`` for a policy without memory."""
    out: list[Any] = []
    while key(len(out)) in columns:
        out.append(columns[key(len(out))])
    return out


def no_previous_action(space: gym.Space[Any], *batch: int) -> Array:
    """The previous action a policy with memory sees before an episode's first step: zeros of
    ``space``'s shape (after the ``batch`` axes), integer for integer (discrete) actions."""
    dtype = np.int64 if space.dtype is None or space.dtype.kind in "iu" else space.dtype
    return np.zeros((*batch, *(space.shape or ())), dtype=dtype)


class Memory:
    """A policy with memory's inputs for ``rows`` sub-envs or agents (module docstring).

    Args:
        initial: the inputs an episode starts from (the model's initial state, no previous
            action, reward 0), one row.
        rows: how many rows.
        max_seq_len: the longest sequence the policy learns on (``model.max_seq_len``).
    """

    def __init__(self, initial: MemoryRow, rows: int, *, max_seq_len: int) -> None:
        """Every row at ``initial``."""
        self._initial = initial
        self.max_seq_len: int | None = max_seq_len
        """Where the sampler cuts an episode fragment into sequences."""
        self.state = [np.repeat(np.asarray(s)[None], rows, axis=0) for s in initial.state]
        """Each state tensor of every row, ``[rows, ...]``."""
        self.prev_actions: Array = np.repeat(np.asarray(initial.prev_action)[None], rows, axis=0)
        self.prev_rewards: Array = np.full(rows, initial.prev_reward, dtype=np.float32)

    def copy(self) -> Memory:
        """A memory of the same rows now, sharing no arrays with this one."""
        out = Memory(self._initial, len(self.prev_rewards), max_seq_len=self.max_seq_len or 1)
        out.set_state(self.get_state())
        return out

    def inputs(self) -> RecurrentInputs:
        """The ``memory`` of `TorchPolicy.compute_actions` / ``value`` now, every row."""
        return RecurrentInputs(self.state, self.prev_actions, self.prev_rewards)

    def advance(
        self,
        extra: Mapping[str, Array],
        actions: Array,
        rewards: Array,
        *,
        rows: slice | None = None,
    ) -> None:
        """Take a step's new state (``state_out_k`` of the policy's ``extra``), actions and
        rewards, for every row; ``rows``: which rows of ``extra`` are this memory's (a step
        over several memories at once: agents of one policy)."""
        # The step's own arrays (fresh from the policy): reset() may write into them (a
        # memory's rows of them only).
        pick = slice(None) if rows is None else rows
        self.state = [np.asarray(extra[state_out_key(k)])[pick] for k in range(len(self.state))]
        self.prev_actions = (
            np.asarray(actions).astype(self.prev_actions.dtype).reshape(self.prev_actions.shape)
        )
        self.prev_rewards = np.asarray(rewards, dtype=np.float32).reshape(-1).copy()

    def add_reward(self, reward: float, row: int = 0) -> None:
        """A reward that came to ``row`` after its last action (an agent waiting its turn)."""
        self.prev_rewards[row] += reward

    def row(self, i: int) -> MemoryRow:
        """Row ``i``'s inputs now (copies)."""
        return MemoryRow(
            [s[i].copy() for s in self.state],
            self.prev_actions[i].copy(),
            float(self.prev_rewards[i]),
        )

    def set_row(self, i: int, row: MemoryRow | None) -> None:
        """Put ``row`` back as row ``i``'s inputs (an agent whose action was dropped)."""
        if row is None:
            return
        for column, value in zip(self.state, row.state, strict=True):
            column[i] = value
        self.prev_actions[i] = row.prev_action
        self.prev_rewards[i] = row.prev_reward

    def reset(self, rows: Any) -> None:
        """Back to the initial inputs for ``rows`` (their episodes start anew)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size:
            for column, initial in zip(self.state, self._initial.state, strict=True):
                column[rows] = initial
            self.prev_actions[rows] = self._initial.prev_action
            self.prev_rewards[rows] = self._initial.prev_reward

    def columns(self, length: int) -> dict[str, Array]:
        """Zeroed batch columns for ``length`` steps of every row, ``[length, rows, ...]``:
        the state before each step and the previous action and reward (`record` fills them)."""
        out = {
            state_in_key(k): np.zeros((length, *s.shape), dtype=s.dtype)
            for k, s in enumerate(self.state)
        }
        out[_PREV_ACTIONS] = np.zeros((length, *self.prev_actions.shape), self.prev_actions.dtype)
        out[_PREV_REWARDS] = np.zeros((length, *self.prev_rewards.shape), dtype=np.float32)
        return out

    def record(self, columns: Mapping[str, Array], t: int) -> None:
        """Write every row's inputs now as step ``t`` of ``columns`` (from `columns`)."""
        for k, s in enumerate(self.state):
            columns[state_in_key(k)][t] = s
        columns[_PREV_ACTIONS][t] = self.prev_actions
        columns[_PREV_REWARDS][t] = self.prev_rewards

    def row_columns(self) -> dict[str, Any]:
        """Row 0's inputs now as one row of the batch columns (an agent's trajectory)."""
        row = self.row(0)
        out: dict[str, Any] = {state_in_key(k): s for k, s in enumerate(row.state)}
        out[_PREV_ACTIONS], out[_PREV_REWARDS] = row.prev_action, row.prev_reward
        return out

    def recorded(self, columns: Mapping[str, Any], at: int | tuple[int, int]) -> MemoryRow:
        """The inputs recorded ``at`` a row of ``columns`` (``(step, row)`` of the arrays of
        `columns`; a row index of an agent's lists of `row_columns`), copied."""
        state = [np.array(columns[state_in_key(k)][at]) for k in range(len(self.state))]
        return MemoryRow(
            state, np.array(columns[_PREV_ACTIONS][at]), float(columns[_PREV_REWARDS][at])
        )

    @staticmethod
    def stack(rows: Sequence[Any]) -> RecurrentInputs:
        """Rows' inputs (`MemoryRow` each, of one policy) as one batch of inputs, one row
        each."""
        return RecurrentInputs(
            [np.stack(parts) for parts in zip(*(r.state for r in rows), strict=True)],
            np.stack([r.prev_action for r in rows]),
            np.array([r.prev_reward for r in rows], dtype=np.float32),
        )

    def get_state(self) -> tuple[list[Array], Array, Array]:
        """Every row's inputs (copies), for checkpoints."""
        return [s.copy() for s in self.state], self.prev_actions.copy(), self.prev_rewards.copy()

    def set_state(self, state: tuple[list[Array], Array, Array] | None) -> None:
        """Restore :meth:`get_state` (None: keep the inputs as they are)."""
        if state is None:
            return
        self.state = [np.array(s) for s in state[0]]
        self.prev_actions, self.prev_rewards = np.array(state[1]), np.array(state[2])


class NoMemory:
    """The memory of a policy without one: it carries nothing and writes no column."""

    max_seq_len: int | None = None
    """No sequences: a fragment's rows are independent."""

    def copy(self) -> NoMemory:
        """Itself (nothing to copy)."""
        return self

    def inputs(self) -> None:
        """No inputs: the policy acts from the observations alone."""
        return None

    def advance(
        self,
        extra: Mapping[str, Array],
        actions: Array,
        rewards: Array,
        *,
        rows: slice | None = None,
    ) -> None:
        """Nothing to take."""

    def add_reward(self, reward: float, row: int = 0) -> None:
        """Nothing to add to."""

    def row(self, i: int) -> None:
        """No inputs."""
        return None

    def set_row(self, i: int, row: MemoryRow | None) -> None:
        """Nothing to put back."""

    def reset(self, rows: Any) -> None:
        """Nothing to reset."""

    def columns(self, length: int) -> dict[str, Array]:
        """No columns."""
        return {}

    def record(self, columns: Mapping[str, Array], t: int) -> None:
        """Nothing to write."""

    def row_columns(self) -> dict[str, Any]:
        """No columns."""
        return {}

    def recorded(self, columns: Mapping[str, Any], at: int | tuple[int, int]) -> None:
        """No inputs were recorded."""
        return None

    @staticmethod
    def stack(rows: Sequence[Any]) -> None:
        """No inputs."""
        return None

    def get_state(self) -> None:
        """Nothing to save."""
        return None

    def set_state(self, state: Any) -> None:
        """Nothing to restore."""


AnyMemory = Memory | NoMemory
"""What a policy's ``memory(rows)`` gives."""

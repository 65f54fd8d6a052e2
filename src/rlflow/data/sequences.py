"""Sequences: how a batch holds them and how they are laid out. The one module of sequences.

A *sequence* is a run of consecutive rows of one sub-env (or agent) within one episode fragment,
in time order. Every path that learns on sequences reads them from here: a model with memory
(PPO, PG, IMPALA, APPO with ``use_lstm``), V-trace (IMPALA, APPO) and recurrent replay (R2D2).

**One encoding.** Two bool columns mark a batch's sequences; the samplers write them
(`cut_sequences`), the same way for every policy:

- `SEQ_START`: the row starts a sequence. A model with memory starts it from the state stored
  with that row (``state_in_0``, ``state_in_1``...: `rlflow.models.memory`).
- `BOOTSTRAP`: the row closes its sequence. It is no env step (`SampleBatch.env_steps` leaves
  it out, a loss never counts it): its `OBS` is the observation after the sequence's last step,
  the one a learner bootstraps its value from (the episode's last one where it ended), its
  ``prev_actions``/``prev_rewards`` the last step's, its ids the sequence's, every other column
  zero. A sequence closed by one carries one observation more than its steps instead of a
  `NEXT_OBS` per row, and any cut between two sequences is a valid batch.

A policy with memory gets sequences of at most ``max_seq_len`` steps (the episode fragment cut
every ``max_seq_len`` rows); a policy without memory that asks for bootstrap rows (V-trace) gets
one sequence per fragment; a policy that asks for bootstrap rows gets every sequence closed by
one (so each sequence learns alone: V-trace bootstraps from the next observation's value,
computed by a model with memory from the state the sequence ended in). A batch with neither
column has no sequences: its rows are independent.

**One layout.** :class:`SequenceLayout` finds the sequences of a batch (a row after a bootstrap
row starts one too, so a batch written without `SEQ_START` reads the same) and lays them out
start-aligned, ``[B, T]``: sequence ``b``'s ``k``-th row at ``[b, k]``, padding after its end.
Its ``row_*`` view covers all of a sequence's rows (what a model with memory runs over), its
``step_*`` view the env steps, padded with the row the sequence bootstraps from (what V-trace
reads, time-major as the transpose). :meth:`SequenceLayout.columns` sends the layout with a
batch's tensors (`rlflow.learner.PolicyUpdate`); :class:`LayoutTensors` reads it back there.
:func:`minibatch_groups` cuts whole sequences (or rows) into minibatches, and recurrent replay
stores the same layout one sequence per row (`rlflow.replay.buffers.fold_sequences`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from rlflow.checks import check_int
from rlflow.data.sample_batch import (
    ACTIONS,
    AGENT_INDEX,
    BOOTSTRAP,
    ENV_ID,
    EPS_ID,
    OBS,
    PREV_ACTIONS,
    PREV_REWARDS,
    REWARDS,
    SEQ_START,
    SampleBatch,
)
from rlflow.errors import ConfigError

__all__ = [
    "LAYOUT_KEYS",
    "LayoutTensors",
    "SequenceLayout",
    "cut_sequences",
    "minibatch_groups",
]

Array = npt.NDArray[Any]
Index = npt.NDArray[np.int64]

_IDENTITY = (EPS_ID, AGENT_INDEX, ENV_ID)
"""Columns whose value a bootstrap row copies from its sequence's last step."""

_PREVIOUS = {PREV_ACTIONS: ACTIONS, PREV_REWARDS: REWARDS}
"""A model with memory reads the action and reward before each row: a bootstrap row's are its
sequence's last step's."""

# The layout's arrays as they travel with a batch's tensors (no column has these names).
_ROW_INDEX = "_seq_row_index"
_ROW_MASK = "_seq_row_mask"
_STARTS = "_seq_starts"
_STEP_INDEX = "_seq_step_index"
_STEP_MASK = "_seq_step_mask"
_NEXT_ROWS = "_seq_next_rows"
LAYOUT_KEYS = frozenset({_ROW_INDEX, _ROW_MASK, _STARTS, _STEP_INDEX, _STEP_MASK, _NEXT_ROWS})
"""The keys of :meth:`SequenceLayout.columns` in a batch's tensors."""


def cut_sequences(
    fragment: SampleBatch, *, max_seq_len: int | None, bootstrap_obs: npt.ArrayLike | None
) -> SampleBatch:
    """One episode fragment (one sub-env's or agent's rows, in time order) as sequences.

    With ``max_seq_len`` (a policy with memory) a sequence starts every ``max_seq_len`` rows,
    else the fragment is one sequence. With ``bootstrap_obs`` (the observation after the
    fragment's last step) each sequence is closed by a bootstrap row: its observation is the
    next sequence's first one, or ``bootstrap_obs`` after the last. Neither given: the fragment
    as it is, without sequence columns. The samplers call it for every fragment.

    >>> b = cut_sequences(SampleBatch({OBS: [[0.0], [1.0], [2.0]], REWARDS: [1.0, 2.0, 3.0]}),
    ...                   max_seq_len=2, bootstrap_obs=[3.0])
    >>> b[OBS].ravel().tolist(), b[REWARDS].tolist(), b.env_steps()
    ([0.0, 1.0, 2.0, 2.0, 3.0], [1.0, 2.0, 0.0, 3.0, 0.0], 3)
    >>> b[SEQ_START].tolist(), b[BOOTSTRAP].tolist()
    ([True, False, False, True, False], [False, False, True, False, True])
    """
    if max_seq_len is None and bootstrap_obs is None:
        return fragment
    if SEQ_START in fragment or BOOTSTRAP in fragment:
        raise ConfigError("cut_sequences: the fragment is cut into sequences already")
    n = fragment.count
    length = n if max_seq_len is None else check_int(max_seq_len, "max_seq_len", low=1)
    starts = np.arange(0, n, max(length, 1), dtype=np.int64)
    if bootstrap_obs is None:
        out = SampleBatch(dict(fragment))
        out[SEQ_START] = np.zeros(n, dtype=bool)
        out[SEQ_START][starts] = True
        return out
    return _closed(fragment, starts, np.asarray(bootstrap_obs))


def _closed(fragment: SampleBatch, starts: Index, bootstrap_obs: Array) -> SampleBatch:
    """``fragment`` with a bootstrap row after each sequence (starting at ``starts``)."""
    n, runs = fragment.count, len(starts)
    ends = np.append(starts[1:], n)  # one past each sequence's last step
    run_of_row = np.repeat(np.arange(runs), ends - starts)
    step_at = np.arange(n) + run_of_row  # where each step lands among the new rows
    boot_at = ends + np.arange(runs)  # each sequence's bootstrap row
    last = ends - 1  # each sequence's last step (a sequence has at least one)
    columns: dict[str, Array] = {}
    for name, column in fragment.items():
        out = np.zeros((n + runs, *column.shape[1:]), dtype=column.dtype)
        out[step_at] = column
        if name in _IDENTITY:
            out[boot_at] = column[last]
        elif name in _PREVIOUS and _PREVIOUS[name] in fragment:
            out[boot_at] = fragment[_PREVIOUS[name]][last]
        columns[name] = out
    obs = columns[OBS]
    if runs:
        obs[boot_at[:-1]] = fragment[OBS][starts[1:]]
        obs[boot_at[-1]] = np.asarray(bootstrap_obs, dtype=obs.dtype)
    columns[SEQ_START] = np.zeros(n + runs, dtype=bool)
    columns[SEQ_START][step_at[starts]] = True
    columns[BOOTSTRAP] = np.zeros(n + runs, dtype=bool)
    columns[BOOTSTRAP][boot_at] = True
    return SampleBatch(columns)


class SequenceLayout:
    """Where the sequences of a batch are, and their start-aligned layout ``[B, T]``.

    Args:
        rows: each sequence's rows (its bootstrap row included), in batch order ``[B]``;
            sequence ``b`` starts at row ``sum(rows[:b])``.
        steps: each sequence's env steps ``[B]``: its rows, or one less when a bootstrap row
            closes it.

    Build it from a batch with :meth:`of`. ``T`` of the ``row_*`` view is the longest
    sequence's rows, of the ``step_*`` view its steps.

    >>> from rlflow.data.sample_batch import REWARDS
    >>> one = cut_sequences(SampleBatch({OBS: [[0.0]], REWARDS: [1.0]}), max_seq_len=None,
    ...                     bootstrap_obs=[1.0])
    >>> two = cut_sequences(SampleBatch({OBS: [[0.0], [1.0]], REWARDS: [2.0, 3.0]}),
    ...                     max_seq_len=None, bootstrap_obs=[2.0])
    >>> layout = SequenceLayout.of(SampleBatch.concat_samples([one, two]))
    >>> layout.starts.tolist(), layout.steps.tolist(), layout.next_rows.tolist()
    ([0, 2], [1, 2], [1, 4])
    >>> index, mask = layout.step_index()
    >>> index.tolist(), mask.tolist()
    ([[0, 1], [2, 3]], [[True, False], [True, True]])
    """

    def __init__(self, rows: npt.ArrayLike, steps: npt.ArrayLike) -> None:
        """Keep the sizes (checked: ``rows - 1 <= steps <= rows``)."""
        self.rows: Index = np.asarray(rows, dtype=np.int64).reshape(-1)
        """Rows of each sequence ``[B]``, its bootstrap row included."""
        self.steps: Index = np.asarray(steps, dtype=np.int64).reshape(-1)
        """Env steps of each sequence ``[B]`` (0 for a bootstrap row alone)."""
        closing = self.rows - self.steps
        if self.rows.shape != self.steps.shape or np.any((closing < 0) | (closing > 1)):
            raise ConfigError(
                f"SequenceLayout: rows {self.rows.tolist()} and steps {self.steps.tolist()} "
                "differ by more than a bootstrap row per sequence"
            )
        self.starts: Index = np.concatenate([[0], np.cumsum(self.rows)[:-1]]).astype(np.int64)
        """First row of each sequence ``[B]``."""
        self.closed = bool(np.all(closing == 1))
        """Whether a bootstrap row closes every sequence (what V-trace learns on)."""

    @classmethod
    def of(cls, batch: Mapping[str, Any]) -> SequenceLayout | None:
        """The layout of ``batch``'s sequences (module docstring), or None for a batch without
        `SEQ_START` and `BOOTSTRAP` columns (independent rows). `ConfigError` when the first
        row does not start a sequence (a batch cut inside one)."""
        flags = batch.get(SEQ_START)
        closing = batch.get(BOOTSTRAP)
        marks = flags if flags is not None else closing
        if marks is None:
            return None
        count = len(marks)
        begins = np.zeros(count, dtype=bool) if flags is None else np.asarray(flags, dtype=bool)
        boot = np.zeros(count, dtype=bool) if closing is None else np.asarray(closing, dtype=bool)
        if count:
            begins = begins.copy()
            begins[0] |= closing is not None and flags is None  # a batch of closed sequences
            begins[1:] |= boot[:-1]  # a bootstrap row closes its sequence
        if count and not begins[0]:
            raise ConfigError(
                f"a sequence batch must start with a sequence (column {SEQ_START!r}): batches "
                "of sequences are cut between whole sequences only (minibatches, shards); "
                "rlflow.data.sequences"
            )
        first = np.flatnonzero(begins)
        rows = np.diff(np.append(first, count))
        ends = first + rows - 1
        return cls(rows, rows - boot[ends].astype(np.int64) if count else rows)

    @property
    def num_sequences(self) -> int:
        """B, the number of sequences."""
        return int(self.rows.shape[0])

    @property
    def next_rows(self) -> Index:
        """The row each sequence bootstraps from ``[B]``: its bootstrap row (closed sequences;
        else the row after its last, which may be past the batch's end)."""
        return self.starts + self.steps

    def check_closed(self, where: str) -> None:
        """`ConfigError` naming ``where`` unless a bootstrap row closes every sequence."""
        if not self.closed:
            raise ConfigError(
                f"{where}: every sequence of the batch must be closed by a bootstrap row (column "
                f"{BOOTSTRAP!r}); rollout workers write them for policies with "
                "requires_bootstrap_rows = True, and batches are cut between sequences only"
            )

    def _padded(self, sizes: Index, pad: Index) -> tuple[Index, npt.NDArray[np.bool_]]:
        """``([B, T] row indexes, mask)``: each sequence's first ``sizes`` rows from its
        start, then ``pad`` (a row of each sequence) in the padding."""
        width = int(sizes.max()) if sizes.size else 0
        offsets = np.arange(width, dtype=np.int64)[None, :]
        mask = offsets < sizes[:, None]
        index = np.where(mask, self.starts[:, None] + offsets, pad[:, None])
        return index, mask

    def row_index(self) -> tuple[Index, npt.NDArray[np.bool_]]:
        """``([B, R] row indexes, mask)`` of every row of each sequence (its bootstrap row
        too), padded with its first row: what a model with memory runs over."""
        return self._padded(self.rows, self.starts)

    def step_index(self) -> tuple[Index, npt.NDArray[np.bool_]]:
        """``([B, T] row indexes, mask)`` of each sequence's steps, padded with the row it
        bootstraps from (:attr:`next_rows`): what V-trace reads (transposed: time-major)."""
        return self._padded(self.steps, self.next_rows)

    def take(self, which: Sequence[int] | Index) -> tuple[Index, SequenceLayout]:
        """The rows of sequences ``which`` (in that order) and the layout of the batch they
        form: a minibatch or a shard of whole sequences."""
        which = np.asarray(which, dtype=np.int64)
        rows, starts = self.rows[which], self.starts[which]
        index = np.repeat(starts - np.concatenate([[0], np.cumsum(rows)[:-1]]), rows)
        index = index + np.arange(int(rows.sum()), dtype=np.int64)
        return index, SequenceLayout(rows, self.steps[which])

    def columns(self, *, rows: bool = True) -> dict[str, Array]:
        """The layout as arrays to send with a batch's tensors (keys `LAYOUT_KEYS`; read back
        with `LayoutTensors.of`); without ``rows`` the row view is left out (only a model with
        memory reads it)."""
        step_index, step_mask = self.step_index()
        out: dict[str, Array] = {
            _STARTS: self.starts,
            _STEP_INDEX: np.ascontiguousarray(step_index.T),  # time-major, as V-trace reads it
            _STEP_MASK: np.ascontiguousarray(step_mask.T, dtype=np.float32),
            _NEXT_ROWS: self.next_rows,
        }
        if rows:
            out[_ROW_INDEX], out[_ROW_MASK] = self.row_index()
        return out


class LayoutTensors(NamedTuple):
    """A `SequenceLayout` as it arrived with a batch's tensors (on the learner's device)."""

    row_index: Any
    """``[B, R]`` rows of each sequence (bootstrap row included), padded with its first (None
    when sent without the row view)."""
    row_mask: Any
    """``[B, R]`` bool: True on a sequence's rows (None likewise)."""
    starts: Any
    """``[B]`` each sequence's first row (whose ``state_in_k`` starts a model with memory)."""
    step_index: Any
    """``[T, B]`` (time-major) each sequence's steps, padded with the row it bootstraps
    from."""
    step_mask: Any
    """``[T, B]`` float: 1 on steps, 0 on padding."""
    next_rows: Any
    """``[B]`` the row each sequence bootstraps from."""

    @classmethod
    def of(cls, tensors: Mapping[str, Any]) -> LayoutTensors | None:
        """The layout sent with ``tensors`` (`SequenceLayout.columns`), or None without one."""
        if _STARTS not in tensors:
            return None
        return cls(
            tensors.get(_ROW_INDEX),
            tensors.get(_ROW_MASK),
            *(tensors[k] for k in (_STARTS, _STEP_INDEX, _STEP_MASK, _NEXT_ROWS)),
        )


def minibatch_groups(steps: npt.ArrayLike, order: Index, size: int) -> list[Index]:
    """One epoch's minibatches of whole units (rows, or sequences of ``steps`` env steps each),
    taken in ``order``: ``total_steps // size`` minibatches, the ``k``-th ending with the unit
    that brings the running total to ``k * size`` steps; the units after the last one wait for
    the next epoch's order. A batch of fewer than ``size`` steps is one minibatch; an empty one
    none. For rows (one step each) these are the full minibatches of exactly ``size`` rows.

    >>> [g.tolist() for g in minibatch_groups([1] * 5, np.arange(5), 2)]
    [[0, 1], [2, 3]]
    >>> [g.tolist() for g in minibatch_groups([3, 1, 2, 4], np.array([3, 0, 2, 1]), 4)]
    [[3], [0, 2]]
    """
    size = check_int(size, "minibatch_groups: size", low=1)
    ends = np.cumsum(np.asarray(steps, dtype=np.int64)[order])
    total = int(ends[-1]) if len(ends) else 0
    if total < size:
        return [order] if len(order) else []
    thresholds = np.arange(1, total // size + 1, dtype=np.int64) * size
    cuts = np.searchsorted(ends, thresholds, side="left") + 1  # one past each completing unit
    groups = np.split(order[: cuts[-1]], cuts[:-1])
    return [g for g in groups if len(g)]

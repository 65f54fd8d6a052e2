"""Sequence batches: time-ordered sequences, each closed by one bootstrap row.

V-trace (IMPALA, APPO) learns on sequences: consecutive steps of one sub-env within one
episode and one sampled fragment. The samplers write each sequence's rows in time order and
append one *bootstrap row* (`BOOTSTRAP` True) whose `OBS` is the observation after the
sequence's last step, the one a learner bootstraps its value from (the episode's last one where
it ended). A bootstrap row is not an env step: its other columns are zeros
(`SampleBatch.env_steps` leaves it out) and no loss counts it. So the sequence boundaries are
known by construction, each sequence carries one observation more than its steps instead of a
`NEXT_OBS` per row, and any cut between two sequences is a valid batch.

- :func:`add_bootstrap_row` closes one sequence (the samplers call it);
- :class:`SequenceLayout` finds the sequences of a batch from its `BOOTSTRAP` column and lays
  rows out time-major, ``[T, B]``, right-aligned (each sequence ends at row ``T - 1``), which is
  the layout of :func:`rlflow.vtrace.vtrace_torch`;
- :func:`sequence_slices` cuts a batch into minibatches of whole sequences.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    REWARDS,
    SampleBatch,
)
from rlflow.errors import ConfigError

__all__ = ["SequenceLayout", "add_bootstrap_row", "sequence_slices"]

Array = npt.NDArray[Any]

_IDENTITY = (EPS_ID, AGENT_INDEX, ENV_ID)
"""Columns whose value a bootstrap row copies from its sequence's last step."""

_PREVIOUS = {"prev_actions": ACTIONS, "prev_rewards": REWARDS}
"""A policy with memory (`rlflow.models.recurrent`) reads the action and reward before each
row: a bootstrap row's are its sequence's last step's."""


def add_bootstrap_row(batch: SampleBatch, obs: npt.ArrayLike) -> SampleBatch:
    """``batch`` (one sequence, time-ordered) with its bootstrap row appended.

    The new row's `OBS` is ``obs`` (one observation, the one after the last step); its
    `EPS_ID`, `AGENT_INDEX` and `ENV_ID` are the sequence's, its ``prev_actions`` and
    ``prev_rewards`` (a policy with memory) the last step's action and reward; every other
    column is zero; the
    `BOOTSTRAP` column is added (False on every step, True on the new row).

    >>> from rlflow.data.sample_batch import REWARDS
    >>> b = add_bootstrap_row(SampleBatch({OBS: [[0.0], [1.0]], REWARDS: [1.0, 2.0]}), [2.0])
    >>> b[OBS].ravel().tolist(), b[REWARDS].tolist(), b[BOOTSTRAP].tolist(), b.env_steps()
    ([0.0, 1.0, 2.0], [1.0, 2.0, 0.0], [False, False, True], 2)
    """
    if BOOTSTRAP in batch:
        raise ConfigError("add_bootstrap_row: the batch already has bootstrap rows")
    n = batch.count
    columns: dict[str, Array] = {}
    for name, column in batch.items():
        extended = np.zeros((n + 1, *column.shape[1:]), dtype=column.dtype)
        extended[:n] = column
        columns[name] = extended
    columns[OBS][n] = np.asarray(obs, dtype=columns[OBS].dtype)
    for name in _IDENTITY:
        if name in columns and n:
            columns[name][n] = columns[name][n - 1]
    for prev, last in _PREVIOUS.items():  # a recurrent model's inputs on the next observation
        if prev in columns and last in columns and n:
            columns[prev][n] = columns[last][n - 1]
    flags = np.zeros(n + 1, dtype=bool)
    flags[n] = True
    columns[BOOTSTRAP] = flags
    return SampleBatch(columns)


def _bootstrap_rows(batch: Mapping[str, Any], where: str) -> Array:
    """The row indexes of the bootstrap rows, checked: the batch ends with one."""
    flags = batch.get(BOOTSTRAP)
    if flags is None:
        raise ConfigError(
            f"{where}: the batch has no {BOOTSTRAP!r} column; V-trace learns on sequence "
            "batches (rollout workers close every sequence with a bootstrap row for policies "
            "with requires_bootstrap_rows = True)"
        )
    ends = np.flatnonzero(np.asarray(flags))
    count = len(flags)
    if count and (not ends.size or ends[-1] != count - 1):
        raise ConfigError(
            f"{where}: the batch's last row is not a bootstrap row; cut sequence batches "
            "only between sequences (rlflow.data.sequences.sequence_slices)"
        )
    return ends


class SequenceLayout:
    """Where the sequences of a sequence batch are, and their time-major ``[T, B]`` layout.

    ``T`` is the longest sequence's number of steps, ``B`` the number of sequences. Sequence
    ``b`` (rows ``starts[b]`` to ``starts[b] + lengths[b] - 1``, then its bootstrap row
    ``bootstrap_rows[b]``) fills the last ``lengths[b]`` time rows of column ``b``; the rows
    before it are padding (``mask`` False) and repeat the sequence's first step.

    >>> from rlflow.data.sample_batch import REWARDS
    >>> one = add_bootstrap_row(SampleBatch({OBS: [[0.0]], REWARDS: [1.0]}), [1.0])
    >>> two = add_bootstrap_row(SampleBatch({OBS: [[0.0], [1.0]], REWARDS: [2.0, 3.0]}), [2.0])
    >>> layout = SequenceLayout(SampleBatch.concat_samples([one, two]))
    >>> layout.lengths.tolist(), layout.steps.tolist(), layout.bootstrap_rows.tolist()
    ([1, 2], [[0, 2], [0, 3]], [1, 4])
    >>> layout.mask.tolist()
    [[False, True], [True, True]]
    """

    def __init__(self, batch: Mapping[str, Any]) -> None:
        """Find the sequences from ``batch``'s `BOOTSTRAP` column."""
        ends = _bootstrap_rows(batch, "SequenceLayout")
        starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64) if ends.size else ends
        self.bootstrap_rows: npt.NDArray[np.int64] = ends.astype(np.int64)
        """Row index of each sequence's bootstrap row, ``[B]``."""
        self.starts: npt.NDArray[np.int64] = starts
        """Row index of each sequence's first step, ``[B]``."""
        self.lengths: npt.NDArray[np.int64] = self.bootstrap_rows - starts
        """Steps per sequence, ``[B]`` (0 for a sequence of a bootstrap row alone)."""
        self.last_rows: npt.NDArray[np.int64] = np.maximum(self.bootstrap_rows - 1, starts)
        """Row index of each sequence's last step, ``[B]`` (its only row when it has none)."""
        horizon = int(self.lengths.max()) if self.lengths.size else 0
        pad = horizon - self.lengths  # [B]
        time = np.arange(horizon)[:, None]  # [T, 1]
        self.mask: npt.NDArray[np.bool_] = time >= pad[None, :]
        """``[T, B]``: True where a step is, False on padding."""
        self.steps: npt.NDArray[np.int64] = starts[None, :] + np.maximum(time - pad[None, :], 0)
        """``[T, B]`` row indexes: ``rows[layout.steps]`` is a column laid out time-major
        (padding repeats each sequence's first step)."""

    @property
    def horizon(self) -> int:
        """T, the longest sequence's number of steps."""
        return int(self.mask.shape[0])

    @property
    def num_sequences(self) -> int:
        """B, the number of sequences."""
        return int(self.lengths.shape[0])


def sequence_slices(batch: SampleBatch, size: int) -> list[tuple[int, int]]:
    """``(start, end)`` row ranges of whole sequences, each ending at a sequence's bootstrap row
    once it holds at least ``size`` steps (the last range may hold fewer).

    >>> from rlflow.data.sample_batch import REWARDS
    >>> seq = add_bootstrap_row(SampleBatch({OBS: [[0.0], [1.0]], REWARDS: [1.0, 1.0]}), [2.0])
    >>> sequence_slices(SampleBatch.concat_samples([seq, seq, seq]), 3)
    [(0, 6), (6, 9)]
    """
    size = check_int(size, "sequence_slices: size", low=1)
    ends = _bootstrap_rows(batch, "sequence_slices")
    slices: list[tuple[int, int]] = []
    first = steps = 0
    for k, end in enumerate(ends.tolist()):
        start = 0 if k == 0 else int(ends[k - 1]) + 1
        steps += end - start  # this sequence's steps (its rows but the bootstrap one)
        if steps >= size:
            slices.append((first, end + 1))
            first, steps = end + 1, 0
    if first < batch.count:
        slices.append((first, batch.count))
    return slices

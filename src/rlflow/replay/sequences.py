"""Recurrent replay (R2D2): sequences of steps stored, prioritized and replayed as items.

A policy with memory learns from replay only on sequences: consecutive steps of one episode,
started from the recurrent state the rollout worker had at the first one. :func:`fold_sequences`
turns a sampled batch (episode fragments, each closed by a bootstrap row, as the rollout workers
write them for ``requires_bootstrap_rows`` policies: `rlflow.data.sequences`) into one row per
sequence of at most ``length`` steps: every per-step column becomes a ``[length + 1, ...]``
array (the steps, then the observation after the last one, zero-padded), next to the sequence's
stored state (``state_in_k`` of its first step), its number of steps (`SEQ_STEPS`) and whether
its last step ended the episode (`SEQ_TERMINATED`).

:class:`SequenceReplayBuffer` is a `PrioritizedReplayBuffer` of such rows: ``add`` folds, every
item is a sequence, and a sequence's priority is what the learner reports for it (R2D2's mix of
the largest and the mean |TD error| of its steps). It says how many env steps an item holds
(`SequenceReplayBuffer.steps_per_item`), so the replay operators count ``train_batch_size`` and
``learning_starts`` in env steps, as for transitions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.checks import check_int
from rlflow.data.sample_batch import (
    ACTIONS,
    BOOTSTRAP,
    OBS,
    PREV_ACTIONS,
    PREV_REWARDS,
    REWARDS,
    SEQ_STEPS,
    TERMINATEDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.replay.buffers import PrioritizedReplayBuffer

__all__ = ["SEQ_STEPS", "SEQ_TERMINATED", "SequenceReplayBuffer", "fold_sequences"]

SEQ_TERMINATED = "seq_terminated"
"""Column of a folded sequence: whether its last step ended the episode (nothing to
bootstrap from after it)."""

_STEP_COLUMNS = (OBS, ACTIONS, REWARDS, PREV_ACTIONS, PREV_REWARDS)
"""The per-step columns a folded sequence keeps (those present)."""

Array = npt.NDArray[Any]


def fold_sequences(batch: SampleBatch, length: int) -> SampleBatch:
    """One row per sequence of at most ``length`` steps of ``batch`` (module docstring).

    Each episode fragment of ``batch`` (its steps, then its bootstrap row) is cut into runs of
    ``length`` steps; a run's "next observation" row is the step after it, or the fragment's
    bootstrap row after its last run. `ConfigError` unless the batch has bootstrap rows and the
    recurrent state of its steps (``state_in_0``).
    """
    length = check_int(length, "fold_sequences: length", low=1)
    if BOOTSTRAP not in batch or "state_in_0" not in batch:
        raise ConfigError(
            f"fold_sequences: the batch needs the {BOOTSTRAP!r} rows and the recurrent state "
            f"(state_in_0) of its steps; columns are {sorted(batch)} (rollout workers write "
            "them for a recurrent policy with requires_bootstrap_rows = True)"
        )
    ends = np.flatnonzero(np.asarray(batch[BOOTSTRAP]))
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    first, steps, boot, last_run = [], [], [], []
    for start, end in zip(starts, ends, strict=True):  # steps [start, end), bootstrap at end
        for a in range(int(start), int(end), length):
            n = min(length, int(end) - a)
            first.append(a)
            steps.append(n)
            boot.append(a + n)  # the next step's row, or the fragment's bootstrap row
            last_run.append(a + n == end)
    first_a = np.asarray(first, dtype=np.int64)
    steps_a = np.asarray(steps, dtype=np.int64)
    offsets = np.arange(length + 1)
    # [S, length + 1] row indexes: the steps, then the next-observation row, then padding
    # (pointing at the next-observation row; zeroed below).
    index = np.minimum(first_a[:, None] + offsets[None, :], np.asarray(boot)[:, None])
    valid = offsets[None, :] <= steps_a[:, None]
    columns: dict[str, Array] = {}
    for name in _STEP_COLUMNS:
        if name in batch:
            column = np.asarray(batch[name])
            gathered = column[index]
            gathered[~valid] = 0
            columns[name] = gathered
    k = 0
    while f"state_in_{k}" in batch:
        columns[f"state_in_{k}"] = np.asarray(batch[f"state_in_{k}"])[first_a]
        k += 1
    columns[SEQ_STEPS] = steps_a
    terminated = np.asarray(batch[TERMINATEDS]).astype(bool)[first_a + steps_a - 1]
    columns[SEQ_TERMINATED] = terminated & np.asarray(last_run, dtype=bool)
    return SampleBatch(columns)


class SequenceReplayBuffer(PrioritizedReplayBuffer):
    """Prioritized replay of sequences (R2D2): ``capacity_steps // sequence_length`` sequences.

    Args:
        capacity_steps: env steps kept (``buffer_size``), >= ``sequence_length``.
        sequence_length: steps per stored sequence (``replay_sequence_length``), >= 1.
        alpha, beta, seed: as `PrioritizedReplayBuffer`.

    ``add`` takes sampled batches and stores their sequences (:func:`fold_sequences`);
    ``sample(n)`` draws ``n`` sequences; priorities are per sequence.
    """

    def __init__(
        self,
        capacity_steps: int,
        *,
        sequence_length: int,
        alpha: float,
        beta: float,
        seed: int | None = None,
    ) -> None:
        """Create an empty buffer of ``capacity_steps // sequence_length`` sequences."""
        self.sequence_length = check_int(
            sequence_length, "SequenceReplayBuffer: sequence_length", low=1
        )
        steps = check_int(capacity_steps, "SequenceReplayBuffer: capacity_steps", low=1)
        super().__init__(max(1, steps // self.sequence_length), alpha=alpha, beta=beta, seed=seed)

    @property
    def steps_per_item(self) -> int:
        """Env steps one item holds at most: the replay operators sample ``train_batch_size
        // steps_per_item`` items and wait for ``learning_starts / steps_per_item``."""
        return self.sequence_length

    def add(self, batch: SampleBatch) -> None:
        """Store the sequences of a sampled ``batch`` (:func:`fold_sequences`), each at the
        highest priority seen so far."""
        if not isinstance(batch, SampleBatch):
            raise ConfigError(
                f"SequenceReplayBuffer.add: batch must be a SampleBatch, got {type(batch).__name__}"
            )
        folded = fold_sequences(batch, self.sequence_length)
        if folded.count:
            super().add(folded)

"""Tests for rlflow.data.sequences: one encoding (sequence starts, bootstrap rows), one layout
(start-aligned, its row and step views), minibatches of whole sequences."""

from __future__ import annotations

import numpy as np
import pytest

from rlflow.data.sample_batch import (
    ACTIONS,
    BOOTSTRAP,
    EPS_ID,
    OBS,
    PREV_ACTIONS,
    PREV_REWARDS,
    REWARDS,
    SEQ_START,
    SampleBatch,
)
from rlflow.data.sequences import (
    LayoutTensors,
    SequenceLayout,
    cut_sequences,
    minibatch_groups,
)
from rlflow.errors import ConfigError


def _fragment(n: int, first: int = 0, eps: int = 0) -> SampleBatch:
    """``n`` steps: OBS numbers the rows from ``first``, REWARDS the steps (1-based)."""
    rows = np.arange(first, first + n)
    return SampleBatch(
        {
            OBS: np.stack([rows, rows], axis=1).astype(np.uint8),
            ACTIONS: rows % 3,
            REWARDS: (rows + 1).astype(np.float32),
            PREV_ACTIONS: (rows + 2) % 3,
            PREV_REWARDS: rows.astype(np.float32),
            EPS_ID: np.full(n, eps),
        }
    )


def _closed(*lengths: int) -> SampleBatch:
    """Fragments of the given step counts, each one sequence closed by a bootstrap row whose
    observation is 100 + its index."""
    parts, first = [], 0
    for k, n in enumerate(lengths):
        boot = np.full(2, 100 + k, np.uint8)
        parts.append(cut_sequences(_fragment(n, first, k), max_seq_len=None, bootstrap_obs=boot))
        first += n
    return SampleBatch.concat_samples(parts)


def test_bootstrap_rows_close_sequences_and_are_no_env_steps() -> None:
    batch = _closed(3, 1)
    assert batch[BOOTSTRAP].tolist() == [False, False, False, True, False, True]
    assert batch[SEQ_START].tolist() == [True, False, False, False, True, False]
    assert batch[OBS].dtype == np.uint8 and batch[OBS][[3, 5], 0].tolist() == [100, 101]
    assert batch[REWARDS].tolist() == [1, 2, 3, 0, 4, 0]
    assert batch[EPS_ID].tolist() == [0, 0, 0, 0, 1, 1]
    # A bootstrap row's previous action and reward are its sequence's last step's.
    assert batch[PREV_ACTIONS][3] == batch[ACTIONS][2] and batch[PREV_REWARDS][3] == 3.0
    assert (batch.count, batch.env_steps(), batch.agent_steps()) == (6, 4, 4)
    assert batch.as_multi_agent().env_steps() == 4
    with pytest.raises(ConfigError, match="cut into sequences already"):
        cut_sequences(batch, max_seq_len=2, bootstrap_obs=np.zeros(2, np.uint8))


def test_a_fragment_is_cut_every_max_seq_len_and_each_sequence_closed() -> None:
    fragment = _fragment(5)
    plain = cut_sequences(fragment, max_seq_len=None, bootstrap_obs=None)
    assert plain is fragment  # no memory, no bootstrap rows: rows stay independent
    marked = cut_sequences(fragment, max_seq_len=2, bootstrap_obs=None)
    assert marked[SEQ_START].tolist() == [True, False, True, False, True]
    assert BOOTSTRAP not in marked and marked.count == 5
    closed = cut_sequences(fragment, max_seq_len=2, bootstrap_obs=np.array([9, 9], np.uint8))
    # steps 0 1 | boot(obs of step 2) | 2 3 | boot(obs of step 4) | 4 | boot(9)
    assert closed[OBS][:, 0].tolist() == [0, 1, 2, 2, 3, 4, 4, 9]
    assert closed[BOOTSTRAP].tolist() == [False, False, True, False, False, True, False, True]
    assert closed[SEQ_START].tolist() == [True, False, False, True, False, False, True, False]
    assert closed.env_steps() == 5 and closed[REWARDS].sum() == fragment[REWARDS].sum()


def test_layout_is_start_aligned_with_row_and_step_views() -> None:
    batch = _closed(3, 1, 2)
    layout = SequenceLayout.of(batch)
    assert layout is not None and layout.closed and layout.num_sequences == 3
    assert layout.starts.tolist() == [0, 4, 6]
    assert layout.rows.tolist() == [4, 2, 3] and layout.steps.tolist() == [3, 1, 2]
    assert layout.next_rows.tolist() == [3, 5, 8]  # each sequence's bootstrap row
    row_index, row_mask = layout.row_index()  # every row, padded with the first
    assert row_index.tolist() == [[0, 1, 2, 3], [4, 5, 4, 4], [6, 7, 8, 6]]
    assert row_mask.sum(axis=1).tolist() == [4, 2, 3]
    step_index, step_mask = layout.step_index()  # the steps, padded with the bootstrap row
    assert step_index.tolist() == [[0, 1, 2], [4, 5, 5], [6, 7, 8]]
    assert step_mask.tolist() == [[True, True, True], [True, False, False], [True, True, False]]
    rewards = batch[REWARDS][step_index.T]  # time-major
    assert rewards[step_mask.T].tolist() == [1, 4, 5, 2, 6, 3]


def test_layout_reads_batches_marked_either_way_and_refuses_a_cut_sequence() -> None:
    batch = _closed(3, 1, 2)
    without_starts = SampleBatch({k: v for k, v in batch.items() if k != SEQ_START})
    layout = SequenceLayout.of(without_starts)  # a bootstrap row closes its sequence
    assert layout is not None and layout.rows.tolist() == [4, 2, 3]
    assert SequenceLayout.of(_fragment(4)) is None  # independent rows
    open_ = SequenceLayout.of({SEQ_START: np.array([True, False, True])})
    assert open_ is not None and not open_.closed and open_.steps.tolist() == [2, 1]
    with pytest.raises(ConfigError, match="closed by a bootstrap row"):
        open_.check_closed("VTracePolicy")
    with pytest.raises(ConfigError, match="must start with a sequence"):
        SequenceLayout.of(batch.slice(1, batch.count))
    empty = SequenceLayout.of(batch.slice(0, 0))
    assert empty is not None and empty.num_sequences == 0
    assert [a.shape for a in empty.step_index()] == [(0, 0), (0, 0)]


def test_a_minibatch_of_sequences_is_its_rows_with_its_own_layout() -> None:
    batch = _closed(3, 1, 2)
    layout = SequenceLayout.of(batch)
    assert layout is not None
    rows, part = layout.take(np.array([2, 0]))
    assert rows.tolist() == [6, 7, 8, 0, 1, 2, 3]
    assert part.starts.tolist() == [0, 3] and part.next_rows.tolist() == [2, 6]
    columns = part.columns()
    view = LayoutTensors.of(columns)
    assert view is not None and view.step_index.tolist() == [[0, 3], [1, 4], [2, 5]]  # [T, B]
    assert LayoutTensors.of({OBS: batch[OBS]}) is None


def test_minibatch_groups_cut_at_multiples_of_the_size() -> None:
    order = np.arange(6)
    rows = minibatch_groups(np.ones(6, np.int64), order, 4)
    assert [g.tolist() for g in rows] == [[0, 1, 2, 3]]  # full minibatches of rows only
    steps = np.array([3, 3, 3, 3, 3, 3])
    groups = minibatch_groups(steps, order, 5)  # ends reaching 5, 10, 15
    assert [g.tolist() for g in groups] == [[0, 1], [2, 3], [4]]
    assert [g.tolist() for g in minibatch_groups(steps, order, 100)] == [order.tolist()]
    assert minibatch_groups(np.zeros(0, np.int64), np.zeros(0, np.int64), 4) == []
    big = minibatch_groups(np.array([10, 1]), np.array([0, 1]), 3)  # one unit, three sizes
    assert [g.tolist() for g in big] == [[0]]

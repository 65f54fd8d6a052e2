"""Tests for rlflow.data.sequences: bootstrap rows, the time-major layout, whole-sequence cuts."""

from __future__ import annotations

import numpy as np
import pytest

from rlflow.data.sample_batch import BOOTSTRAP, EPS_ID, OBS, REWARDS, SampleBatch
from rlflow.data.sequences import SequenceLayout, add_bootstrap_row, sequence_slices
from rlflow.errors import ConfigError


def _sequences(*lengths: int) -> SampleBatch:
    """Sequences of the given step counts; OBS numbers the rows, REWARDS the steps (1-based)."""
    parts, step = [], 0
    for k, n in enumerate(lengths):
        rewards = np.arange(step + 1, step + n + 1, dtype=np.float32)
        step += n
        part = SampleBatch({OBS: np.zeros((n, 2), np.uint8), REWARDS: rewards, EPS_ID: [k] * n})
        parts.append(add_bootstrap_row(part, np.full(2, 100 + k, np.uint8)))
    return SampleBatch.concat_samples(parts)


def test_bootstrap_rows_close_sequences_and_are_no_env_steps() -> None:
    batch = _sequences(3, 1)
    assert batch[BOOTSTRAP].tolist() == [False, False, False, True, False, True]
    assert batch[OBS].dtype == np.uint8 and batch[OBS][[3, 5], 0].tolist() == [100, 101]
    assert batch[REWARDS].tolist() == [1, 2, 3, 0, 4, 0]
    assert batch[EPS_ID].tolist() == [0, 0, 0, 0, 1, 1]
    assert (batch.count, batch.env_steps(), batch.agent_steps()) == (6, 4, 4)
    assert batch.as_multi_agent().env_steps() == 4
    with pytest.raises(ConfigError, match="already has bootstrap rows"):
        add_bootstrap_row(batch, np.zeros(2, np.uint8))


def test_layout_is_time_major_right_aligned_with_padding_masked() -> None:
    batch = _sequences(3, 1, 2)
    layout = SequenceLayout(batch)
    assert (layout.horizon, layout.num_sequences) == (3, 3)
    assert layout.lengths.tolist() == [3, 1, 2]
    assert layout.bootstrap_rows.tolist() == [3, 5, 8]
    assert layout.last_rows.tolist() == [2, 4, 7]
    # Column b holds sequence b's rows in time order, ending at the last time row.
    assert layout.steps.tolist() == [[0, 4, 6], [1, 4, 6], [2, 4, 7]]
    assert layout.mask.tolist() == [[True, False, False], [True, False, True], [True, True, True]]
    rewards = batch[REWARDS][layout.steps]
    assert rewards[layout.mask].tolist() == [1, 2, 5, 3, 4, 6]  # time-major order


def test_whole_sequence_slices_and_bad_cuts() -> None:
    batch = _sequences(3, 1, 2, 4)
    assert sequence_slices(batch, 4) == [(0, 6), (6, 14)]
    assert sequence_slices(batch, 1) == [(0, 4), (4, 6), (6, 9), (9, 14)]
    assert sequence_slices(batch, 100) == [(0, 14)]
    with pytest.raises(ConfigError, match="last row is not a bootstrap row"):
        SequenceLayout(batch.slice(0, 2))
    with pytest.raises(ConfigError, match="no 'bootstrap' column"):
        sequence_slices(SampleBatch({REWARDS: [1.0]}), 1)
    empty = SequenceLayout(batch.slice(0, 0))
    assert (empty.horizon, empty.num_sequences) == (0, 0)

"""Tests of SampleBatch and MultiAgentBatch."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlflow.config import DEFAULT_POLICY_ID
from rlflow.data import (
    ACTIONS,
    EPS_ID,
    OBS,
    REWARDS,
    MultiAgentBatch,
    SampleBatch,
    from_multi_agent_if_single,
    to_multi_agent,
)
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(60)


def make_batch(start: int, count: int) -> SampleBatch:
    """Rows numbered start..start+count-1 in every column, so row identity is visible."""
    rows = np.arange(start, start + count)
    return SampleBatch(
        {OBS: np.stack([rows, -rows], axis=1).astype(np.float32), REWARDS: rows * 1.0}
    )


def test_columns_become_arrays_and_count_is_rows() -> None:
    b = SampleBatch({REWARDS: [1.0, 2.0, 3.0]}, actions=[0, 1, 1])
    assert isinstance(b[REWARDS], np.ndarray)
    assert b[ACTIONS].tolist() == [0, 1, 1]
    assert b.count == 3
    assert b.env_steps() == 3
    assert b.agent_steps() == 3


def test_length_mismatch_names_column_and_lengths() -> None:
    with pytest.raises(
        ConfigError, match=r"'actions' has length 2 but column 'rewards' has length 3"
    ):
        SampleBatch({REWARDS: [1.0, 2.0, 3.0], ACTIONS: [0, 1]})
    b = SampleBatch({REWARDS: [1.0, 2.0]})
    with pytest.raises(ConfigError, match="'obs' has length 3"):
        b[OBS] = np.zeros((3, 4))
    with pytest.raises(ConfigError, match="'obs' has length 1"):
        b.update({OBS: np.zeros((1, 4))})


def test_scalar_column_is_rejected() -> None:
    with pytest.raises(ConfigError, match="'rewards' is a scalar"):
        SampleBatch({REWARDS: 1.0})


def test_replacing_the_only_column_may_change_length() -> None:
    b = SampleBatch({REWARDS: [1.0]})
    b[REWARDS] = [1.0, 2.0]
    assert b.count == 2


def test_empty_batch_and_empty_concat() -> None:
    assert SampleBatch().count == 0
    assert SampleBatch.concat_samples([]).count == 0
    assert isinstance(SampleBatch.concat_samples([]), SampleBatch)
    b = make_batch(0, 2)
    out = SampleBatch.concat_samples([SampleBatch(), b, make_batch(5, 0)])
    assert out[REWARDS].tolist() == [0.0, 1.0]


def test_concat_keeps_order_and_copies() -> None:
    a, b = make_batch(0, 2), make_batch(10, 3)
    out = SampleBatch.concat_samples([a, b])
    assert out[REWARDS].tolist() == [0.0, 1.0, 10.0, 11.0, 12.0]
    assert out[OBS][:, 1].tolist() == [0.0, -1.0, -10.0, -11.0, -12.0]
    assert a.concat(b)[REWARDS].tolist() == out[REWARDS].tolist()
    out[REWARDS][0] = 99.0
    assert a[REWARDS][0] == 0.0


def test_concat_with_different_columns_fails() -> None:
    with pytest.raises(ConfigError, match=r"batch 1 has columns \['rewards'\]"):
        SampleBatch.concat_samples([make_batch(0, 1), SampleBatch({REWARDS: [1.0]})])


def test_slice_is_a_view() -> None:
    b = make_batch(0, 5)
    s = b.slice(1, 3)
    assert s[REWARDS].tolist() == [1.0, 2.0]
    s[REWARDS][0] = -7.0
    assert b[REWARDS][1] == -7.0


def test_copy_is_deep() -> None:
    b = make_batch(0, 3)
    c = b.copy()
    assert isinstance(c, SampleBatch)
    c[OBS][0, 0] = 42.0
    assert b[OBS][0, 0] == 0.0


def test_shuffle_permutes_all_columns_together() -> None:
    b = make_batch(0, 6)
    s = b.shuffle(np.random.default_rng(0))
    expected = np.random.default_rng(0).permutation(6)
    assert s[REWARDS].tolist() == expected.astype(float).tolist()
    assert np.array_equal(s[OBS][:, 0], s[REWARDS])
    assert np.array_equal(s[OBS][:, 1], -s[REWARDS])
    assert b[REWARDS].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_minibatches_yield_full_ones_in_order() -> None:
    b = make_batch(0, 10)
    mbs = list(b.minibatches(4))
    assert [m[REWARDS].tolist() for m in mbs] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]


def test_minibatches_whole_batch_when_size_is_large() -> None:
    b = make_batch(0, 3)
    mbs = list(b.minibatches(3))
    assert len(mbs) == 1 and mbs[0][REWARDS].tolist() == [0.0, 1.0, 2.0]
    assert [m.count for m in b.minibatches(100)] == [3]
    assert list(SampleBatch().minibatches(4)) == []


def test_minibatches_shuffled_with_rng() -> None:
    b = make_batch(0, 9)
    mbs = list(b.minibatches(3, rng=np.random.default_rng(1)))
    perm = np.random.default_rng(1).permutation(9).astype(float)
    assert [m[REWARDS].tolist() for m in mbs] == [
        perm[0:3].tolist(),
        perm[3:6].tolist(),
        perm[6:9].tolist(),
    ]


def test_minibatches_validates_size_on_call() -> None:
    with pytest.raises(ConfigError, match="size=0 must be an integer >= 1"):
        make_batch(0, 3).minibatches(0)  # no next(): the error comes at the call


def test_split_by_episode_uses_consecutive_runs() -> None:
    b = SampleBatch({EPS_ID: [7, 7, 3, 3, 3, 7], REWARDS: [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]})
    parts = b.split_by_episode()
    assert [p[EPS_ID].tolist() for p in parts] == [[7, 7], [3, 3, 3], [7]]
    assert [p[REWARDS].tolist() for p in parts] == [[0.0, 1.0], [2.0, 3.0, 4.0], [5.0]]
    assert SampleBatch().split_by_episode() == []
    with pytest.raises(ConfigError, match="needs the 'eps_id' column"):
        make_batch(0, 2).split_by_episode()


def test_size_bytes_sums_columns() -> None:
    b = SampleBatch({OBS: np.zeros((4, 3), np.float32), ACTIONS: np.zeros(4, np.int64)})
    assert b.size_bytes() == 4 * 3 * 4 + 4 * 8


def test_pickle_round_trip_keeps_type_and_values() -> None:
    b = make_batch(0, 4)
    c = pickle.loads(pickle.dumps(b))
    assert isinstance(c, SampleBatch)
    assert c.keys() == b.keys()
    assert np.array_equal(c[OBS], b[OBS])


def test_as_multi_agent_and_back() -> None:
    b = make_batch(0, 3)
    ma = b.as_multi_agent()
    assert list(ma.policy_batches) == [DEFAULT_POLICY_ID]
    assert ma.policy_batches[DEFAULT_POLICY_ID] is b
    assert ma.count == ma.env_steps() == 3
    assert ma.as_multi_agent() is ma
    assert to_multi_agent(b).count == 3
    assert from_multi_agent_if_single(ma) is b
    assert from_multi_agent_if_single(b) is b
    two = MultiAgentBatch({"a": b, "b": b}, 3)
    assert from_multi_agent_if_single(two) is two


def test_multi_agent_counts() -> None:
    ma = MultiAgentBatch({"a": make_batch(0, 3), "b": make_batch(0, 5)}, env_steps_count=4)
    assert ma.count == 4
    assert ma.env_steps() == 4
    assert ma.agent_steps() == 8
    assert ma.size_bytes() == make_batch(0, 3).size_bytes() + make_batch(0, 5).size_bytes()


def test_multi_agent_concat_mixes_single_agent_batches() -> None:
    ma = MultiAgentBatch({"a": make_batch(0, 2), DEFAULT_POLICY_ID: make_batch(100, 1)}, 2)
    out = SampleBatch.concat_samples(
        [make_batch(10, 2), ma, MultiAgentBatch({"a": make_batch(20, 1)}, 1)]
    )
    assert isinstance(out, MultiAgentBatch)
    assert out.env_steps() == 2 + 2 + 1
    assert out.policy_batches[DEFAULT_POLICY_ID][REWARDS].tolist() == [10.0, 11.0, 100.0]
    assert out.policy_batches["a"][REWARDS].tolist() == [0.0, 1.0, 20.0]
    assert out.agent_steps() == 6


def test_multi_agent_copy_and_select() -> None:
    ma = MultiAgentBatch({"a": make_batch(0, 2), "b": make_batch(0, 3)}, 3)
    c = ma.copy()
    c.policy_batches["a"][REWARDS][0] = 5.0
    assert ma.policy_batches["a"][REWARDS][0] == 0.0
    sel = ma.select(["b"])
    assert list(sel.policy_batches) == ["b"]
    assert sel.env_steps() == 3 and sel.agent_steps() == 3
    with pytest.raises(
        ConfigError, match=r"unknown policy ids \['z'\]; the batch has \['a', 'b'\]"
    ):
        ma.select(["z"])


def test_multi_agent_validates() -> None:
    with pytest.raises(ConfigError, match="env_steps_count=-1"):
        MultiAgentBatch({}, -1)
    with pytest.raises(ConfigError, match="policy 'p' maps to dict"):
        MultiAgentBatch({"p": {REWARDS: np.zeros(1)}}, 1)  # type: ignore[dict-item]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=6), max_size=6))
def test_concat_then_slice_recovers_parts(lengths: list[int]) -> None:
    parts, start = [], 0
    for n in lengths:
        parts.append(make_batch(start, n))
        start += n
    whole = SampleBatch.concat_samples(parts)
    assert whole.count == sum(lengths)
    offset = 0
    for part in parts:
        piece = whole.slice(offset, offset + part.count)
        offset += part.count
        assert piece[REWARDS].tolist() == part[REWARDS].tolist()
        assert piece[OBS].tolist() == part[OBS].tolist()

"""Replay buffers: ring order, sampling distributions, weights, n-step golden values, memory."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rlflow.replay.buffers as buffers_module
from rlflow.data.sample_batch import (
    ACTIONS,
    EPS_ID,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.replay import (
    BATCH_INDEXES,
    DISCOUNTS,
    WEIGHTS,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    n_step_transitions,
    replay_forever,
)
from rlflow.schedules import LinearSchedule

pytestmark = pytest.mark.timeout(120)

ID = "id"  # a test column: the global step number of a row


def rows(start: int, count: int) -> SampleBatch:
    ids = np.arange(start, start + count)
    return SampleBatch({REWARDS: ids.astype(np.float32), ACTIONS: ids % 3})


def stored(buffer: ReplayBuffer, column: str) -> list:
    return buffer.get_state()["ring"]["columns"][column].tolist()


# ---------------------------------------------------------------------------- uniform ring
def test_ring_overwrites_oldest_first_in_exact_slot_order() -> None:
    buf = ReplayBuffer(5, seed=0)
    buf.add(rows(0, 3))
    assert len(buf) == 3 and stored(buf, REWARDS) == [0, 1, 2]
    buf.add(rows(3, 4))
    assert len(buf) == 5 and stored(buf, REWARDS) == [5, 6, 2, 3, 4]
    buf.add(rows(7, 12))  # more rows than capacity: as if written one by one from slot 2
    assert stored(buf, REWARDS) == [15, 16, 17, 18, 14]
    stats = buf.stats()
    assert stats["num_added"] == 19 and stats["num_evicted"] == 14 and stats["size"] == 5


def test_sample_rows_match_their_batch_indexes() -> None:
    buf = ReplayBuffer(5, seed=0)
    buf.add(rows(0, 7))
    batch = buf.sample(50)
    contents = stored(buf, REWARDS)
    assert batch.count == 50 and batch[BATCH_INDEXES].dtype == np.int64
    assert batch[REWARDS].tolist() == [contents[i] for i in batch[BATCH_INDEXES]]
    assert (batch[ACTIONS] == batch[REWARDS].astype(int) % 3).all()


def test_uniform_indexes_in_range_and_seeded_reproducibility() -> None:
    def draws(seed: int) -> np.ndarray:
        buf = ReplayBuffer(100, seed=seed)
        buf.add(rows(0, 10))
        return np.concatenate([buf.sample(32)[BATCH_INDEXES] for _ in range(10)])

    a = draws(1)
    assert a.min() >= 0 and a.max() <= 9 and set(a.tolist()) == set(range(10))
    assert (draws(1) == a).all()
    assert not (draws(2) == a).all()


def test_state_round_trip_resumes_the_same_samples() -> None:
    for make in (
        lambda: ReplayBuffer(6, seed=3),
        lambda: PrioritizedReplayBuffer(6, alpha=0.7, beta=0.5, seed=3),
    ):
        a = make()
        a.add(rows(0, 9))
        if isinstance(a, PrioritizedReplayBuffer):
            a.update_priorities(np.arange(6), np.arange(1.0, 7.0))
        a.sample(4)
        b = make()
        b.set_state(a.get_state())
        for _ in range(3):
            x, y = a.sample(8), b.sample(8)
            assert sorted(x) == sorted(y)
            assert all((x[k] == y[k]).all() for k in x)
        assert a.stats() == b.stats()


# ----------------------------------------------------------------------------- prioritized
def frequencies(buf: PrioritizedReplayBuffer, n: int = 20_000) -> np.ndarray:
    idx = buf.sample(n)[BATCH_INDEXES]
    return np.bincount(idx, minlength=len(buf)) / n


def test_prioritized_frequencies_follow_p_to_the_alpha() -> None:
    buf = PrioritizedReplayBuffer(4, alpha=0.5, beta=0.4, seed=0)
    buf.add(rows(0, 4))
    priorities = np.array([1.0, 2.0, 3.0, 4.0])
    buf.update_priorities(np.arange(4), priorities)
    expected = priorities**0.5 / (priorities**0.5).sum()
    np.testing.assert_allclose(frequencies(buf), expected, atol=0.012)


def test_alpha_zero_is_uniform_and_new_rows_get_the_max_priority() -> None:
    buf = PrioritizedReplayBuffer(8, alpha=0.0, beta=1.0, seed=0)
    buf.add(rows(0, 4))
    buf.update_priorities([0], [100.0])
    np.testing.assert_allclose(frequencies(buf), 0.25, atol=0.012)
    assert (buf.sample(16)[WEIGHTS] == 1.0).all()
    p = PrioritizedReplayBuffer(8, alpha=1.0, beta=0.4, seed=0)
    p.add(rows(0, 2))
    p.update_priorities([0, 1], [1.0, 3.0])
    p.add(rows(2, 1))  # gets max priority 3
    np.testing.assert_allclose(frequencies(p), [1 / 7, 3 / 7, 3 / 7], atol=0.012)


def test_importance_weights_equal_the_formula() -> None:
    buf = PrioritizedReplayBuffer(4, alpha=1.0, beta=0.5, seed=0)
    buf.add(rows(0, 4))
    buf.update_priorities([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0])
    batch = buf.sample(64)
    # P(i) = p_i / 10, N = 4: w_i = (4 P(i))^-0.5 / (4 * 0.1)^-0.5 = (1 / p_i)^0.5.
    by_index = {0: 1.0, 1: 0.5**0.5, 2: (1 / 3) ** 0.5, 3: 0.5}
    expected = [by_index[i] for i in batch[BATCH_INDEXES].tolist()]
    assert batch[WEIGHTS].dtype == np.float32
    np.testing.assert_allclose(batch[WEIGHTS], expected, rtol=1e-6)
    # beta overrides per call; beta = 1: w_i = p_min / p_i.
    batch = buf.sample(64, beta=1.0)
    np.testing.assert_allclose(batch[WEIGHTS], 1.0 / (batch[BATCH_INDEXES] + 1.0), rtol=1e-6)


def test_update_priorities_changes_frequencies() -> None:
    buf = PrioritizedReplayBuffer(4, alpha=1.0, beta=0.4, seed=1)
    buf.add(rows(0, 4))
    np.testing.assert_allclose(frequencies(buf), 0.25, atol=0.012)
    buf.update_priorities([2, 2], [5.0, 9.0])  # a repeated index keeps its last priority
    np.testing.assert_allclose(frequencies(buf), [1 / 12, 1 / 12, 9 / 12, 1 / 12], atol=0.012)
    assert buf.stats()["max_priority"] == 9.0


def test_linear_schedule() -> None:
    beta = LinearSchedule(initial=0.4, final=1.0, steps=100)
    assert [beta.value(s) for s in (-5, 0, 50, 100, 1000)] == pytest.approx(
        [0.4, 0.4, 0.7, 1.0, 1.0]
    )
    assert LinearSchedule(initial=0.4, final=1.0, steps=0).value(0) == 1.0


# ---------------------------------------------------------------------------------- n-step
def test_n_step_golden_values() -> None:
    batch = SampleBatch(
        {
            OBS: [0, 1, 2, 10, 11],
            NEXT_OBS: [1, 2, 99, 11, 12],
            REWARDS: [1.0, 2.0, 3.0, 4.0, 5.0],
            TERMINATEDS: [False, False, True, False, False],
            TRUNCATEDS: [False] * 5,
            EPS_ID: [7, 7, 7, 8, 8],
        }
    )
    out = n_step_transitions(batch, n=2, gamma=0.9)
    np.testing.assert_allclose(out[REWARDS], [1 + 0.9 * 2, 2 + 0.9 * 3, 3, 4 + 0.9 * 5, 5])
    assert out[NEXT_OBS].tolist() == [2, 99, 99, 12, 12]
    assert out[TERMINATEDS].tolist() == [False, True, True, False, False]
    np.testing.assert_allclose(out[DISCOUNTS], [0.81, 0.81, 0.9, 0.81, 0.9], rtol=1e-6)
    assert out[OBS].tolist() == batch[OBS].tolist() and batch[REWARDS][0] == 1.0


def test_n_step_stops_at_truncation_without_episode_ids() -> None:
    batch = SampleBatch(
        {
            OBS: [0, 1, 2, 3],
            NEXT_OBS: [1, 50, 3, 4],
            REWARDS: np.ones(4, dtype=np.float32),
            TERMINATEDS: [False] * 4,
            TRUNCATEDS: [False, True, False, False],
        }
    )
    out = n_step_transitions(batch, n=3, gamma=0.5)
    assert out[REWARDS].dtype == np.float32
    np.testing.assert_allclose(out[REWARDS], [1.5, 1.0, 1.5, 1.0])
    assert out[NEXT_OBS].tolist() == [50, 50, 4, 4]
    assert out[TRUNCATEDS].tolist() == [True, True, False, False]
    assert not out[TERMINATEDS].any()
    np.testing.assert_allclose(out[DISCOUNTS], [0.25, 0.5, 0.25, 0.5])


# ------------------------------------------------------------ next obs by reference, memory
def fragments(
    lengths: list[int], ends: list[bool], n: int, frames: np.ndarray, start: int
) -> tuple[list[SampleBatch], int]:
    """Consecutive rollout fragments of one env; step k sees frames[k]; reset frames repeat."""
    out, step = [], start
    for length, end in zip(lengths, ends, strict=True):
        ids = np.arange(step, step + length)
        terminated = np.zeros(length, dtype=bool)
        terminated[-1] = end
        batch = SampleBatch(
            {
                OBS: frames[ids],
                NEXT_OBS: frames[ids + 1],
                REWARDS: np.ones(length, dtype=np.float32),
                TERMINATEDS: terminated,
                ID: ids,
            }
        )
        out.append(n_step_transitions(batch, n=n, gamma=0.9))
        step += length
    return out, step


def expected_next(batch: SampleBatch, frames: np.ndarray, by_id: dict) -> np.ndarray:
    return np.stack([by_id[int(i)] for i in batch[ID]])


@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=30),
    ends=st.lists(st.booleans(), min_size=30, max_size=30),
    n=st.integers(1, 3),
    capacity=st.integers(1, 40),
)
def test_next_obs_by_reference_is_exact_through_wraps(lengths, ends, n, capacity) -> None:
    # Frames repeat (values mod 7), so equal frames of other steps are shared or referenced;
    # 64-byte rows, the smallest stored by reference.
    frames = (np.arange(400)[:, None] % 7 * np.arange(1, 33)[None]).astype(np.int16)
    buf = ReplayBuffer(capacity, seed=0)
    by_id: dict[int, np.ndarray] = {}
    batches, _ = fragments(lengths, ends[: len(lengths)], n, frames, 0)
    buf.add(batches[0])
    assert buf.get_state()["ring"]["dedup"]
    by_id.update(zip(batches[0][ID].tolist(), batches[0][NEXT_OBS], strict=True))
    for batch in batches[1:]:
        buf.add(batch)
        by_id.update(zip(batch[ID].tolist(), batch[NEXT_OBS], strict=True))
        sample = buf.sample(3 * capacity)
        assert (sample[NEXT_OBS] == expected_next(sample, frames, by_id)).all()
        assert (sample[OBS] == frames[sample[ID]]).all()


def test_tail_of_next_obs_grows_to_capacity_and_stays_exact() -> None:
    frames = np.arange(200)[:, None] * np.ones((1, 16), dtype=np.int32)  # all distinct, 64 B
    buf = ReplayBuffer(40, seed=0)
    by_id: dict[int, np.ndarray] = {}
    # Long fragments first, so the tail is mid-ring when one-step fragments (every next obs a
    # tail frame) make it grow.
    batches, _ = fragments([10] * 7 + [1] * 40 + [3] * 10, [False] * 57, 1, frames, 0)
    for batch in batches:
        buf.add(batch)
        by_id.update(zip(batch[ID].tolist(), batch[NEXT_OBS], strict=True))
        sample = buf.sample(80)
        assert (sample[NEXT_OBS] == expected_next(sample, frames, by_id)).all()
    assert 16 < len(buf.get_state()["ring"]["tail"]) <= 40  # grew from capacity // 64, min 16


def test_next_obs_equal_to_an_earlier_obs_is_not_referenced() -> None:
    a, b, c = (np.full(16, v, dtype=np.int32) for v in (1, 2, 3))
    buf = ReplayBuffer(2, seed=0)
    buf.add(SampleBatch({OBS: [a, b], NEXT_OBS: [b, a]}))  # row 1's next obs is row 0's obs
    buf.add(SampleBatch({OBS: [c], NEXT_OBS: [c]}))  # overwrites row 0
    sample = buf.sample(20)
    (keep,) = np.flatnonzero((sample[OBS] == b).all(axis=1))[:1]
    assert (sample[NEXT_OBS][keep] == a).all()


def test_memory_per_image_transition_is_under_twice_the_frame() -> None:
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(1201, 84, 84, 4), dtype=np.uint8)
    buf = PrioritizedReplayBuffer(500, alpha=0.6, beta=0.4, seed=0)
    by_id: dict[int, np.ndarray] = {}
    batches, _ = fragments([50] * 24, [i % 3 == 0 for i in range(24)], 3, frames, 0)
    for batch in batches:
        buf.add(batch)
        by_id.update(zip(batch[ID].tolist(), batch[NEXT_OBS], strict=True))
    frame_bytes = frames[0].nbytes
    assert buf.stats()["bytes_per_transition"] < 2 * frame_bytes
    assert buf.stats()["bytes_per_transition"] < 1.2 * frame_bytes  # the ratio we expect here
    sample = buf.sample(64)
    assert (sample[NEXT_OBS] == expected_next(sample, frames, by_id)).all()
    assert (sample[OBS] == frames[sample[ID]]).all()


def test_small_or_mismatched_next_obs_is_kept_as_a_column() -> None:
    for obs, nxt in [(np.zeros((2, 8)), np.ones((2, 4))), (np.zeros((2, 4)), np.ones((2, 4)))]:
        buf = ReplayBuffer(4, seed=0)
        buf.add(SampleBatch({OBS: obs, NEXT_OBS: nxt}))
        assert not buf.get_state()["ring"]["dedup"]
        assert (buf.sample(2)[NEXT_OBS] == 1).all()


# ---------------------------------------------------------------------- learning_starts
def test_replay_forever_yields_none_until_learning_starts() -> None:
    buf = ReplayBuffer(10, seed=0)
    replays = replay_forever(buf, num_items=4, learning_starts=3)
    assert next(replays) is None
    buf.add(rows(0, 2))
    assert next(replays) is None
    buf.add(rows(2, 1))
    assert next(replays).count == 4


# ----------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: ReplayBuffer(0), "capacity=0"),
        (lambda: PrioritizedReplayBuffer(4, alpha=1.5, beta=0.4), "alpha=1.5"),
        (lambda: PrioritizedReplayBuffer(4, alpha=0.6, beta=-0.1), "beta=-0.1"),
        (lambda: ReplayBuffer(4).sample(3), r"num_items=3\): the buffer is empty"),
        (lambda: PrioritizedReplayBuffer(4, alpha=0.0, beta=0.0).sample(1, beta=2), "beta=2"),
        (lambda: replay_forever(ReplayBuffer(4), num_items=0), "num_items=0"),
        (lambda: n_step_transitions(rows(0, 2), n=0, gamma=0.9), "n=0"),
        (lambda: n_step_transitions(rows(0, 2), n=2, gamma=0.9), "lacks columns"),
        (lambda: LinearSchedule(initial=0, final=1, steps=-1), "steps=-1"),
    ],
)
def test_errors_name_the_argument_and_value(make, text) -> None:
    with pytest.raises(ConfigError, match=text):
        make()


def test_bad_priorities_and_batches_are_rejected() -> None:
    buf = PrioritizedReplayBuffer(4, alpha=0.6, beta=0.4)
    buf.add(rows(0, 2))
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match=f"got {bad!r} at index 1"):
            buf.update_priorities([0, 1], [1.0, bad])
    with pytest.raises(ConfigError, match=r"len\(buffer\)=2"):
        buf.update_priorities([2], [1.0])
    with pytest.raises(ConfigError, match="equal length"):
        buf.update_priorities([0, 1], [1.0])
    with pytest.raises(ConfigError, match="same columns"):
        buf.add(SampleBatch({REWARDS: [1.0]}))
    with pytest.raises(ConfigError, match="'actions' has rows of float64"):
        buf.add(SampleBatch({REWARDS: [1.0], ACTIONS: [0.5]}))


def test_docstring_examples_run() -> None:
    result = doctest.testmod(buffers_module)
    assert result.failed == 0 and result.attempted > 0


def test_prioritized_add_takes_initial_priorities_from_a_weights_column() -> None:
    buf = PrioritizedReplayBuffer(8, alpha=1.0, beta=0.4, seed=0)
    batch = SampleBatch(
        {OBS: np.arange(4, dtype=np.float32)[:, None], WEIGHTS: np.array([1.0, 2.0, 3.0, 4.0])}
    )
    buf.add(batch)
    counts = np.bincount(buf.sample(20_000)[BATCH_INDEXES], minlength=4)
    # P(i) = p_i / sum(p) = i+1 / 10 with alpha = 1.
    np.testing.assert_allclose(counts / 20_000, [0.1, 0.2, 0.3, 0.4], atol=0.015)
    assert buf.stats()["max_priority"] == 4.0
    with pytest.raises(ConfigError, match="initial priorities"):
        buf.add(SampleBatch({OBS: np.zeros((1, 1), np.float32), WEIGHTS: np.array([0.0])}))

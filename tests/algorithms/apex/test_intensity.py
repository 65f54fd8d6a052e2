"""`KeepTrainingIntensity` across a restore: the ratio counts from this process's first replay."""

from __future__ import annotations

import pytest

from rlflow import flow
from rlflow.algorithms.apex.intensity import (
    REPLAY_START_REPLAYED,
    REPLAY_START_SAMPLED,
    KeepTrainingIntensity,
)
from rlflow.flow import NOT_READY
from rlflow.ops import keys

pytestmark = pytest.mark.timeout(60)


def test_a_restored_run_samples_until_its_empty_buffers_replay_again(
    local_backend: None,
) -> None:
    """A checkpoint saved while the learner was 3,200 replayed steps behind, restored with
    empty buffers (``checkpoint_replay_buffers`` off): sampling must go on until the shards
    replay again. Holding it for the saved deficit hung the restored Ape-X run for good
    (found by ``benchmarks/soak.py``: no result in 10 minutes, the driver waiting on nothing)."""
    gate = KeepTrainingIntensity(8.0, slack=16)
    held: list[bool] = []

    def step(tag: str) -> str:
        counters = flow.current_metrics().counters
        counters[keys.NUM_ENV_STEPS_SAMPLED if tag == "s" else keys.NUM_ENV_STEPS_REPLAYED] += 4
        hold = gate.hold_sampling if tag == "s" else gate.hold_replay
        held.append(hold(tag) is NOT_READY)
        return tag

    stream = flow.from_iterable("ssssrs").for_each(step)
    counters = stream.metrics.counters
    # What the checkpoint held: 900 steps sampled since replay began, 4,000 replayed (8 x 900
    # would be 7,200).
    counters.update(
        {
            keys.NUM_ENV_STEPS_SAMPLED: 1000,
            keys.NUM_ENV_STEPS_REPLAYED: 4000,
            REPLAY_START_SAMPLED: 100,
        }
    )
    assert list(stream) == list("ssssrs")
    # Four samples pass while the buffers fill; the first replayed batch starts the count (4
    # replayed, within the slack); one more sample puts the learner 28 > 16 steps behind.
    assert held == [False, False, False, False, False, True]
    assert counters[REPLAY_START_SAMPLED] == 1016
    assert counters[REPLAY_START_REPLAYED] == 4000

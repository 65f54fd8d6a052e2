"""Hold an asynchronous plan's training intensity: replayed env steps per sampled env step.

In a plan where sampling and replay run side by side (Ape-X), how many times each transition is
trained on depends on which side is faster: on a busy machine the learner falls behind and the
same run learns less per env step. :class:`KeepTrainingIntensity` pins the ratio: one object,
two stages, each answering ``NOT_READY`` (its item is offered again later; upstream is not read)
while its side is ahead of the other by more than a slack. In
:func:`~rlflow.ops.concurrently` the other op runs meanwhile; never both hold.
"""

from __future__ import annotations

from typing import Any, Final

from rlflow import flow
from rlflow.checks import check_int, check_number
from rlflow.flow import NOT_READY
from rlflow.ops import keys

__all__ = ["REPLAY_START_REPLAYED", "REPLAY_START_SAMPLED", "KeepTrainingIntensity"]

REPLAY_START_SAMPLED: Final = "replay_start_env_steps_sampled"
"""Counter: env steps sampled when this process's first replayed batch came (0: none came)."""
REPLAY_START_REPLAYED: Final = "replay_start_env_steps_replayed"
"""Counter: env steps replayed before this process's first replayed batch (a restored run's)."""


class KeepTrainingIntensity:
    """Keep ``num_env_steps_replayed`` within ``slack`` of ``intensity`` x the env steps sampled
    since replay began.

    Items: ``T -> T`` for both stages; use :meth:`hold_sampling` with ``.for_each`` on the
    sampling op (right after its rollout source) and :meth:`hold_replay` on the replay op
    (right after its replay source). With ``S`` the env steps sampled since the first replayed
    batch of this process and ``R`` those replayed since:

    - sampling holds while ``R + slack < intensity * S`` (the learner is behind);
    - replay holds while ``R > intensity * S + slack`` (the learner is ahead).

    Before the first replayed batch sampling never holds (the buffers fill to their
    ``learning_starts``). A restored run starts counting again at its own first replayed
    batch: its buffers may be empty (``checkpoint_replay_buffers`` off), and holding sampling
    for the saved run's deficit would wait for a learner that has nothing to replay. Side
    effects: counters ``replay_start_env_steps_sampled``, ``replay_start_env_steps_replayed``.

    Two sources of 4-step items, "s" sampled and "r" replayed, at intensity 2: once replay
    began, two replayed items pass per sampled one, whatever the sources could give.

    >>> from rlflow import flow
    >>> from rlflow.ops import concurrently
    >>> gate = KeepTrainingIntensity(2.0, slack=0)
    >>> def counted(key):
    ...     def count(tag):
    ...         flow.current_metrics().counters[key] += 4
    ...         return tag
    ...     return count
    >>> samples = flow.from_iterable("s" * 20).for_each(counted("num_env_steps_sampled"))
    >>> replays = flow.from_iterable("r" * 40).for_each(counted("num_env_steps_replayed"))
    >>> ops = [samples.for_each(gate.hold_sampling), replays.for_each(gate.hold_replay)]
    >>> "".join(concurrently(ops, mode="round_robin").take(15))
    'srrsrrsrrsrrsrr'
    """

    def __init__(self, intensity: float | None, *, slack: int) -> None:
        """Validate ``intensity`` (replayed per sampled env step, > 0; None: neither side ever
        holds, both run free) and ``slack`` (env steps replayed, >= 0)."""
        self.intensity = None
        if intensity is not None:
            label = "KeepTrainingIntensity: intensity"
            self.intensity = check_number(intensity, label, low=0, low_open=True)
        self.slack = check_int(slack, "KeepTrainingIntensity: slack", low=0)
        self._replayed_before: int | None = None  # replayed steps at this process's first look
        self._began = False  # a replayed batch came in this process

    def _ahead(self) -> float:
        """``R - intensity * S``: > 0 when replay is ahead; 0 before replay began in this
        process or without an intensity."""
        if self.intensity is None:
            return 0.0
        counters = flow.current_metrics().counters
        if not self._began:
            if self._replayed_before is None:  # read here: a restore sets the counters late
                self._replayed_before = counters[keys.NUM_ENV_STEPS_REPLAYED]
            if counters[keys.NUM_ENV_STEPS_REPLAYED] == self._replayed_before:
                return 0.0
            self._began = True
            counters[REPLAY_START_SAMPLED] = counters[keys.NUM_ENV_STEPS_SAMPLED]
            counters[REPLAY_START_REPLAYED] = self._replayed_before
        sampled = counters[keys.NUM_ENV_STEPS_SAMPLED] - counters[REPLAY_START_SAMPLED]
        replayed = counters[keys.NUM_ENV_STEPS_REPLAYED] - counters[REPLAY_START_REPLAYED]
        return replayed - self.intensity * sampled

    def hold_sampling(self, item: Any) -> Any:
        """The item, or ``NOT_READY`` while the learner is more than ``slack`` behind."""
        return NOT_READY if self._ahead() < -self.slack else item

    def hold_replay(self, item: Any) -> Any:
        """The item, or ``NOT_READY`` while replay is more than ``slack`` ahead."""
        return NOT_READY if self._ahead() > self.slack else item

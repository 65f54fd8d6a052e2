"""How a plan waits when none of its inputs has an item ready, without spinning.

Every operator that answers ``NOT_READY`` says why to the :class:`Waiter` of the read in
progress: pending futures (gathers), an outside event such as a queue or a retry (polls), or a
sibling of ``duplicate`` that must be read first. When a whole pass over a union's inputs gave
nothing, the union blocks in :meth:`Waiter.block` on all pending futures at once.
"""

from __future__ import annotations

import time
from typing import Any

from rlflow.errors import PlanError
from rlflow.flow import backend

_MIN_SLEEP_S = 0.0001
_MAX_SLEEP_S = 0.005
_MAX_FUTURE_WAIT_S = 1.0


class Waiter:
    """Collects why inputs were not ready during one pass, then waits for the first change."""

    __slots__ = ("_futures", "_polled", "_siblings", "_sleep_s", "waits")

    def __init__(self) -> None:
        self._futures: dict[Any, None] = {}
        self._polled = False
        self._siblings: list[str] = []
        self._sleep_s = _MIN_SLEEP_S
        self.waits = 0

    def pending(self, futures: Any) -> None:
        """Some input waits on these futures."""
        for fut in futures:
            self._futures[fut] = None

    def poll(self) -> None:
        """Some input waits on something outside the plan (a queue, a thread, a retry)."""
        self._polled = True

    def sibling(self, label: str) -> None:
        """A ``duplicate`` child is ahead and waits for its siblings to be read."""
        self._siblings.append(label)

    def progress(self) -> None:
        """An item arrived: reset the poll back-off."""
        self._sleep_s = _MIN_SLEEP_S

    def block(self) -> None:
        """Wait until something registered since the last call may have changed."""
        futures, polled, siblings = list(self._futures), self._polled, self._siblings
        self._futures, self._polled, self._siblings = {}, False, []
        self.waits += 1
        if futures:
            timeout = self._sleep_s if polled else _MAX_FUTURE_WAIT_S
            backend.wait(futures, num_returns=1, timeout=timeout)
            return
        if siblings and not polled:
            raise PlanError(
                f"{siblings[0]} is ahead of its siblings and nothing else can make progress: "
                "read all outputs of duplicate() together (e.g. with union() or concurrently())"
            )
        # Only outside events (or a user transform's own NOT_READY) remain: back off gently.
        time.sleep(self._sleep_s)
        self._sleep_s = min(self._sleep_s * 2, _MAX_SLEEP_S)

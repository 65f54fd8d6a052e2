"""Env steps counted outside the library under test: a Gymnasium wrapper for `peers.py`.

`StepCounter` wraps each env a peer builds (rlflow through ``env_wrappers``, Sample Factory and
RLlib through a registered env creator) and appends ``"<unix time> <steps so far>"`` to a file of
its own in the folder named by ``$PEERS_COUNT_DIR`` at most every `FLUSH_S` seconds (and at its
first step). `peers.py` sums the files over a time window (`counted_rate`), so a library's own
counters are checked against the steps its envs really took. This module imports only the
standard library and Gymnasium (any version from 0.29): it runs in every peer's venv.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from pathlib import Path
from typing import Any

import gymnasium as gym

FLUSH_S = 0.25
"""Seconds between two lines of one env's count file."""

COUNT_DIR_VAR = "PEERS_COUNT_DIR"
"""The environment variable naming the folder of count files (no counting without it)."""


class StepCounter(gym.Wrapper):
    """Counts ``step`` calls and writes the running count with the time to a file of its own.

    Args:
        env: The env to count.
    """

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        folder = os.environ.get(COUNT_DIR_VAR)
        self._path = Path(folder) / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.txt" if folder else None
        self._steps = 0
        self._next_flush = 0.0

    def step(self, action: Any) -> Any:
        """Step the env, count the step and, every `FLUSH_S`, append the count to the file."""
        out = self.env.step(action)
        self._steps += 1
        if self._path is not None:
            now = time.time()
            if now >= self._next_flush:
                self._next_flush = now + FLUSH_S
                with self._path.open("a") as f:
                    f.write(f"{now:.4f} {self._steps}\n")
        return out


def read_counts(folder: str | Path) -> list[list[tuple[float, int]]]:
    """Each count file of ``folder`` as its ``(time, steps)`` lines in order."""
    series = []
    for path in sorted(Path(folder).glob("*.txt")):
        rows = []
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                rows.append((float(parts[0]), int(parts[1])))
        if rows:
            series.append(rows)
    return series


def steps_at(rows: list[tuple[float, int]], t: float) -> float:
    """One env's steps at time ``t``, linear between its lines; 0 before its first line (the
    first step), its last count after its last line."""
    if not rows or t <= rows[0][0]:
        return 0.0 if not rows or t < rows[0][0] else float(rows[0][1])
    for (t0, n0), (t1, n1) in itertools.pairwise(rows):
        if t0 <= t <= t1:
            return n0 + (n1 - n0) * (t - t0) / (t1 - t0) if t1 > t0 else float(n1)
    return float(rows[-1][1])


def counted_rate(series: list[list[tuple[float, int]]], start: float, end: float) -> float:
    """Env steps per second summed over all envs between the unix times ``start`` and ``end``."""
    if end <= start:
        return float("nan")
    steps = sum(steps_at(rows, end) - steps_at(rows, start) for rows in series)
    return steps / (end - start)

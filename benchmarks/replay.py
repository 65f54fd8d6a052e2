"""Replay buffer throughput and memory: uniform and prioritized, CartPole and Atari-shaped obs.

For each observation kind (CartPole: 4 float32; Atari: 84x84x4 uint8) and buffer kind, the
buffer is filled to capacity with 1-step transitions (episode fragments of 50 steps from 4 envs,
``NEXT_OBS[t] == OBS[t+1]`` inside a fragment); then adds into the full buffer (overwriting, 200
rows per add), sampling with batches of 32 and 512 and, for prioritized buffers, priority updates
of 512 rows are each timed for ``--seconds``.
Baselines measured in the same run: "raw copy" writes the same batches into preallocated numpy
arrays (OBS and NEXT_OBS both, no checks); "raw gather" fancy-indexes those arrays at uniform
random rows. Prints rows/s and the ratio to the baseline, and the allocated bytes per stored
transition against the raw observation size.

Capacity: 1M for CartPole. For Atari 1M transitions need 1M x 28,224 B = 26.3 GiB of frames
alone, more than this machine's 24 GiB, so the default is 100k (2.6 GiB), which fits beside
other processes and fills in seconds; ``--image-capacity`` changes it.
Run: ``python benchmarks/replay.py [--quick] [--seconds 0.5] [--image-capacity 100000]``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

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
from rlflow.replay import BATCH_INDEXES, PrioritizedReplayBuffer, ReplayBuffer

FRAGMENT = 50
ENVS = 4
POOL_BATCHES = 8


def make_batches(obs_shape: tuple[int, ...], dtype: Any, seed: int = 0) -> list[SampleBatch]:
    """``POOL_BATCHES`` add-batches of ``ENVS`` episode fragments of ``FRAGMENT`` steps each."""
    rng = np.random.default_rng(seed)
    rows = FRAGMENT * ENVS
    batches = []
    for b in range(POOL_BATCHES):
        # One frame per step plus the final next obs of each fragment.
        if np.issubdtype(dtype, np.integer):
            frames = rng.integers(0, 256, size=(ENVS, FRAGMENT + 1, *obs_shape), dtype=dtype)
        else:
            frames = rng.standard_normal((ENVS, FRAGMENT + 1, *obs_shape)).astype(dtype)
        terminated = np.zeros((ENVS, FRAGMENT), dtype=bool)
        terminated[0, -1] = True
        batches.append(
            SampleBatch(
                {
                    OBS: frames[:, :-1].reshape(rows, *obs_shape),
                    NEXT_OBS: frames[:, 1:].reshape(rows, *obs_shape),
                    ACTIONS: rng.integers(0, 4, size=rows),
                    REWARDS: rng.standard_normal(rows).astype(np.float32),
                    TERMINATEDS: terminated.reshape(rows),
                    TRUNCATEDS: np.zeros(rows, dtype=bool),
                    EPS_ID: np.repeat(np.arange(ENVS) + b * ENVS, FRAGMENT),
                }
            )
        )
    return batches


class RawArrays:
    """The baseline: preallocated columns (OBS and NEXT_OBS both), ring writes, no checks."""

    def __init__(self, capacity: int, like: SampleBatch) -> None:
        self.capacity = capacity
        self.cols = {k: np.empty((capacity, *v.shape[1:]), v.dtype) for k, v in like.items()}
        self.pos = 0
        self.size = 0

    def add(self, batch: SampleBatch) -> None:
        n = batch.count
        for k, store in self.cols.items():
            store[self.pos : self.pos + n] = batch[k]  # capacity is a multiple of n here
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.capacity, self.size + n)

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        idx = rng.integers(0, self.size, size=n)
        return {k: v[idx] for k, v in self.cols.items()}


def fill(add: Callable[[SampleBatch], None], batches: list[SampleBatch], rows: int) -> float:
    """Add pool batches round robin until ``rows`` rows were added; return rows/s."""
    start = time.perf_counter()
    added, i = 0, 0
    while added < rows:
        add(batches[i % len(batches)])
        added += batches[0].count
        i += 1
    return added / (time.perf_counter() - start)


def rate(fn: Callable[[], Any], rows: int, seconds: float) -> float:
    """Rows/s of calling ``fn`` (which handles ``rows`` rows) repeatedly for ``seconds``."""
    fn()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        calls += 1
    return calls * rows / (time.perf_counter() - start)


def measure(
    buf: ReplayBuffer | RawArrays, batches: list[SampleBatch], capacity: int, seconds: float
) -> dict[str, float]:
    """Fill ``buf`` to ``capacity``, then time sampling (and priority updates)."""
    rng = np.random.default_rng(1)

    def draw(n: int) -> Any:
        return buf.sample(n, rng) if isinstance(buf, RawArrays) else buf.sample(n)

    fill(buf.add, batches, capacity)  # first touch of the memory: page faults, not timed
    pool = itertools.cycle(batches)
    out = {"add": rate(lambda: buf.add(next(pool)), batches[0].count, seconds)}
    out.update({f"s{n}": rate(lambda n=n: draw(n), n, seconds) for n in (32, 512)})
    if isinstance(buf, PrioritizedReplayBuffer):
        idx = buf.sample(512)[BATCH_INDEXES]
        prios = np.random.default_rng(2).uniform(0.1, 2.0, size=512)
        out["update"] = rate(lambda: buf.update_priorities(idx, prios), 512, seconds)
    if isinstance(buf, ReplayBuffer):
        out["bytes"] = buf.stats()["bytes_per_transition"]
    return out


def bench_kind(
    name: str, obs_shape: tuple[int, ...], dtype: Any, capacity: int, seconds: float
) -> list[dict[str, Any]]:
    """Measure the baseline and both buffers for one observation kind (one at a time)."""
    batches = make_batches(obs_shape, dtype)
    capacity -= capacity % batches[0].count
    raw = measure(RawArrays(capacity, batches[0]), batches, capacity, seconds)
    gc.collect()
    obs_bytes = batches[0][OBS][0].nbytes
    results = []
    for kind in ("uniform", "prioritized"):
        buf = (
            ReplayBuffer(capacity, seed=0)
            if kind == "uniform"
            else PrioritizedReplayBuffer(capacity, alpha=0.6, beta=0.4, seed=0)
        )
        row: dict[str, Any] = {"obs": name, "buffer": kind, "capacity": capacity}
        row.update(measure(buf, batches, capacity, seconds))
        del buf
        gc.collect()
        for key in ("add", "s32", "s512"):
            row[f"{key}_ratio"] = row[key] / raw[key]
        row["bytes_ratio"] = row["bytes"] / obs_bytes
        results.append(row)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100k / 10k capacity, 0.2 s each")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per sample rate")
    parser.add_argument("--image-capacity", type=int, default=None)
    args = parser.parse_args()
    seconds = args.seconds or (0.2 if args.quick else 0.5)
    cart_capacity = 100_000 if args.quick else 1_000_000
    image_capacity = args.image_capacity or (10_000 if args.quick else 100_000)
    print(
        f"CartPole capacity {cart_capacity:,}; Atari capacity {image_capacity:,} "
        f"({image_capacity * 84 * 84 * 4 / 2**30:.1f} GiB of frames; 1M would need 26.3 GiB, "
        "more than this machine's 24 GiB RAM)"
    )
    rows = bench_kind("cartpole 4xf32", (4,), np.float32, cart_capacity, seconds)
    rows += bench_kind("atari 84x84x4 u8", (84, 84, 4), np.uint8, image_capacity, seconds)
    header = (
        f"{'obs':<17} {'buffer':<11} {'capacity':>9} {'add rows/s':>11} {'vs raw':>6} "
        f"{'sample32/s':>11} {'vs raw':>6} {'sample512/s':>11} {'vs raw':>6} "
        f"{'B/transition':>12} {'vs obs':>6} {'update512/s':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        update = f"{r['update']:>11,.0f}" if "update" in r else f"{'-':>11}"
        print(
            f"{r['obs']:<17} {r['buffer']:<11} {r['capacity']:>9,} {r['add']:>11,.0f} "
            f"{r['add_ratio']:>6.2f} {r['s32']:>11,.0f} {r['s32_ratio']:>6.2f} "
            f"{r['s512']:>11,.0f} {r['s512_ratio']:>6.2f} {r['bytes']:>12,.0f} "
            f"{r['bytes_ratio']:>6.2f} {update}"
        )
    print(
        "vs raw: ratio to plain numpy arrays holding OBS and NEXT_OBS (copy in / fancy-index "
        "out), measured in this run; vs obs: allocated bytes per stored transition over one "
        "observation's bytes (the baseline stores 2 observations per transition)."
    )


if __name__ == "__main__":
    main()

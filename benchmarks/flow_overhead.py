"""Overhead of rlflow's dataflow against a hand-written Ray loop, and of local chains.

(1) The same work done by (a) a hand-written Ray loop in the style of the original A3C code
(one pending call per actor, ``ray.wait``, resubmit) and (b) the plan
``from_actors(actors).gather_async().for_each(consume)``; 2 actors, per-item work of 0, 1 and
10 ms (sleeping or busy CPU work on the actor) and payloads of 1 KB and 1 MB numpy arrays.
Prints items/s of both and the ratio (goal: >= 0.97 at 1 ms and above). Runs alternate a/b
and the best of ``--repeats`` is kept for each.
(2) Per-item cost of a 10-stage local ``for_each`` chain against a plain generator chain.
(3) Driver CPU while a union of async gathers waits on slow actors, against a polling loop.

    python benchmarks/flow_overhead.py [--repeats 7] [--work sleep|busy] [--quick]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import ray

from rlflow import flow


class BenchWorker(flow.ParallelIteratorWorker):
    """Produces ``payload_bytes`` arrays, spending ``work_ms`` of CPU on each."""

    def __init__(self, work_ms: float, payload_bytes: int, busy: bool) -> None:
        super().__init__(self._forever, repeat=False)
        self.work_s = work_ms / 1000.0
        self.busy = busy
        self.payload = np.ones(payload_bytes // 8, dtype=np.float64)

    def next_item(self) -> np.ndarray:
        if not self.busy:
            time.sleep(self.work_s)
            return self.payload
        end = time.perf_counter() + self.work_s
        while time.perf_counter() < end:
            pass
        return self.payload

    def _forever(self) -> Iterator[np.ndarray]:
        while True:
            yield self.next_item()


class SleepyWorker(flow.ParallelIteratorWorker):
    """Sleeps ``delay_s`` per item (a slow env or learner)."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(self._forever, repeat=False)
        self.delay_s = delay_s

    def next_item(self) -> int:
        time.sleep(self.delay_s)
        return 1

    def _forever(self) -> Iterator[int]:
        while True:
            yield self.next_item()


def consume(item: np.ndarray) -> int:
    return item.shape[0]


def hand_written(actors: list[Any], n: int) -> float:
    start = time.perf_counter()
    pending = {a.next_item.remote(): a for a in actors}
    done = 0
    while done < n:
        ready, _ = ray.wait(list(pending), num_returns=1)
        ref = ready[0]
        actor = pending.pop(ref)
        item = ray.get(ref)
        pending[actor.next_item.remote()] = actor
        consume(item)
        done += 1
    elapsed = time.perf_counter() - start
    ray.get(list(pending))
    return n / elapsed


def dataflow(actors: list[Any], n: int) -> float:
    start = time.perf_counter()
    plan = flow.from_actors(actors).gather_async().for_each(consume)
    for _ in range(n):
        next(plan)
    elapsed = time.perf_counter() - start
    return n / elapsed


def bench_ray(repeats: int, quick: bool, busy: bool) -> None:
    kind = "busy CPU work" if busy else "sleeping work"
    print(f"(1) 2 actors, {kind}: async gather vs hand-written ray.wait loop")
    print(f"    items/s, best and median of {repeats} paired runs (order alternating);")
    print("    ratio = median over pairs of rlflow/hand-written (this machine is noisy)")
    print(
        f"{'work':>6} {'payload':>8} {'hand best':>10} {'rlflow best':>12} {'best ratio':>11} "
        f"{'median ratio':>13}"
    )
    Worker = flow.remote(BenchWorker)
    for work_ms in (0.0, 1.0, 10.0):
        for payload in (1024, 1024 * 1024):
            target_s = 0.6 if quick else 1.5
            per_item_s = max(work_ms / 1000.0 / 2, 0.00025 if payload < 10_000 else 0.0015)
            n = max(50, int(target_s / per_item_s))
            runs: dict[str, list[float]] = {"hand": [], "flow": []}
            for rep in range(repeats):
                for mode in ("hand", "flow") if rep % 2 == 0 else ("flow", "hand"):
                    actors = [Worker.remote(work_ms, payload, busy) for _ in range(2)]
                    ray.get([a.next_item.remote() for a in actors])  # warm up
                    fn = hand_written if mode == "hand" else dataflow
                    runs[mode].append(fn(actors, n))
                    for a in actors:
                        ray.kill(a)
            best_hand, best_flow = max(runs["hand"]), max(runs["flow"])
            paired = sorted(f / h for f, h in zip(runs["flow"], runs["hand"], strict=True))
            median = paired[len(paired) // 2]
            size = "1KB" if payload < 10_000 else "1MB"
            print(
                f"{work_ms:>4.0f}ms {size:>8} {best_hand:>10.0f} {best_flow:>12.0f} "
                f"{best_flow / best_hand:>11.3f} {median:>13.3f}"
            )


def bench_local_chain(n: int) -> None:
    def ident(x: int) -> int:
        return x

    def gen_chain() -> float:
        it: Any = iter(range(n))
        for _ in range(10):
            it = (ident(x) for x in it)
        start = time.perf_counter()
        for _ in it:
            pass
        return (time.perf_counter() - start) / n

    def flow_chain() -> float:
        it: Any = flow.from_iterable(range(n))
        for _ in range(10):
            it = it.for_each(ident)
        start = time.perf_counter()
        for _ in it:
            pass
        return (time.perf_counter() - start) / n

    g = min(gen_chain() for _ in range(3))
    f = min(flow_chain() for _ in range(3))
    print(
        f"\n(2) 10-stage local chain, {n} items: generators {g * 1e6:.2f} us/item, "
        f"rlflow for_each {f * 1e6:.2f} us/item ({f / g:.2f}x; {(f - g) / 10 * 1e9:.0f} ns "
        "extra per stage per item: context, stats, NOT_READY check)"
    )


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bench_idle(seconds: float) -> None:
    Worker = flow.remote(SleepyWorker)
    actors = [Worker.remote(0.05) for _ in range(2)]
    ray.get([a.next_item.remote() for a in actors])
    a = flow.from_actors(actors[:1]).gather_async()
    b = flow.from_actors(actors[1:]).gather_async()
    plan = a.union(b)
    wall, cpu = time.perf_counter(), cpu_seconds()
    items = 0
    while time.perf_counter() - wall < seconds:
        next(plan)
        items += 1
    ours = (cpu_seconds() - cpu) / (time.perf_counter() - wall)
    # The original's behaviour: poll every input with a zero timeout in a loop.
    pending = {x.next_item.remote(): x for x in actors}
    wall, cpu = time.perf_counter(), cpu_seconds()
    while time.perf_counter() - wall < seconds:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=0)
        for ref in ready:
            actor = pending.pop(ref)
            ray.get(ref)
            pending[actor.next_item.remote()] = actor
    polling = (cpu_seconds() - cpu) / (time.perf_counter() - wall)
    print(
        f"\n(3) union of 2 async gathers on actors taking 50 ms/item, {items} items in "
        f"{seconds:.0f}s: driver CPU {ours * 100:.1f}% of a core (a zero-timeout polling "
        f"loop: {polling * 100:.1f}%)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--work",
        choices=["sleep", "busy"],
        default="sleep",
        help="per-item work on the actors: sleep (isolates coordination overhead) or busy CPU "
        "(adds contention for this machine's cores)",
    )
    parser.add_argument("--quick", action="store_true", help="shorter runs (for a smoke test)")
    args = parser.parse_args()
    flow.init(
        backend="ray", num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False
    )
    print(f"ray {ray.__version__}, {os.cpu_count()} cores")
    bench_ray(args.repeats, args.quick, args.work == "busy")
    bench_local_chain(50_000 if args.quick else 200_000)
    bench_idle(1.0 if args.quick else 3.0)
    flow.shutdown()


if __name__ == "__main__":
    main()

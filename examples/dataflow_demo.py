"""A short dataflow over Ray actors: the main job of the README until training lands.

Two "producer" actors generate work items; the shards transform them in parallel, the driver
gathers them asynchronously, merges them with a second stream, counts through the shared
context, and prints the plan's graph and per-stage statistics.

    python examples/dataflow_demo.py [--backend local]
"""

from __future__ import annotations

import argparse
import time

from rlflow import flow


def slow_square(x: int) -> int:
    time.sleep(0.002)  # stands in for real work on the actor
    return x * x


def count(item: int) -> int:
    flow.current_metrics().counters["items"] += 1
    return item


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["ray", "local"], default="ray")
    parser.add_argument("--items", type=int, default=2000)
    args = parser.parse_args()
    if args.backend == "ray":
        flow.init(backend="ray", num_cpus=2)
    else:
        flow.init(backend="local")
    start = time.perf_counter()
    squares = flow.from_range(args.items, num_shards=2).for_each(slow_square).gather_async()
    labels = flow.from_iterable(range(-args.items // 10, 0))
    plan = squares.union(labels).for_each(count)
    total = 0
    for i, item in enumerate(plan, 1):
        total += item
        if i % 500 == 0:
            print(f"  {i:6d} items  {i / (time.perf_counter() - start):8.0f} items/s")
    elapsed = time.perf_counter() - start
    print(f"done: {plan.metrics.counters['items']} items, sum={total}, {elapsed:.2f}s")
    print("\nplan graph (Mermaid):\n" + plan.describe().to_mermaid())
    print("\nper-stage statistics (driver side):")
    for label, stats in plan.metrics.stages.items():
        print(
            f"  {label:40s} items={stats.items:6d} fn={stats.fn_time_s * 1e3:8.1f}ms "
            f"wait={stats.wait_time_s * 1e3:8.1f}ms"
        )
    flow.shutdown()


if __name__ == "__main__":
    main()

"""Does the driver keep up with many rollout actors? Items/s and driver CPU per item, by loop.

Simulated workers: ``--sizes`` (default 16, 64, 256) lightweight actors (``num_cpus=0``, no torch:
a numpy "policy" of one matrix) whose ``sample()`` sleeps ``--step-ms`` per env step, like a slow
simulator, and returns a `SampleBatch` of ``--fragment`` rows. Three driver loops, each run for
``--seconds``, as the plans drive them (the rlflow operators themselves):

- ``gather``: ``from_actors(workers).gather_async(num_async=2)``, items counted;
- ``apex``: Ape-X's store / replay / update loop: each batch into a replay shard
  (``StoreToReplayBuffer``, 4 shards), weights pushed to its worker every 4 of its batches, and
  replayed batches read alongside (``concurrently``, async), without a learner;
- ``impala``: IMPALA's enqueue / broadcast loop: batches concatenated to 4 fragments
  (``ConcatBatches``), put on a learner queue that a thread empties, and the cached weights sent
  to the worker of every batch.
- ``impala_refs``: the same loop as it runs with learner actors (``num_learners``): each worker
  keeps its batch in its object store (``parallel_rollouts(by_reference=True)`` does this with
  ``store_batch``), the driver concatenates references (``BatchRefs``) and a thread hands each
  train batch to a learner actor that fetches the fragments from the workers; the driver
  handles references and counts only.
- ``impala_values``: the same learner actor fed by value, the way it would be without
  references: the batches come to the driver, are concatenated there and sent on.

``--row-bytes`` adds an image-like uint8 column of that many bytes per row (Atari frames stacked
4 deep are 28224 bytes), where moving the data is what the driver pays for.

The baseline is the simulators' own rate (``N / (step_ms * fragment)`` batches/s: what an
infinitely fast driver would get); the ratio says where the driver saturates. Per-item cost is
the driver process's CPU seconds (user + sys) per batch. Each size is measured ``--rounds``
times (median printed) with the load average. Memory: a worker process takes about 70 MB.

    python benchmarks/driver_scaling.py [--sizes 16,64,256] [--seconds 10] [--rounds 3]
        [--step-ms 2] [--fragment 50] [--row-bytes 0]
        [--loops gather,apex,impala,impala_values,impala_refs]
"""

from __future__ import annotations

import argparse
import functools
import os
import queue
import resource
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from rlflow import flow
from rlflow.data import ACTIONS, OBS, REWARDS, SampleBatch
from rlflow.data.refs import BatchRef, BatchRefs, store_batch
from rlflow.flow import ActorItem
from rlflow.ops import ConcatBatches, Enqueue, StoreToReplayBuffer, concurrently, keys, replay
from rlflow.replay import ReplayShardSpec, create_replay_shards

OBS_DIM = 8


class SimWorker(flow.ParallelIteratorWorker):
    """A rollout worker stand-in: a slow simulator and a one-matrix numpy policy."""

    def __init__(self, step_s: float, fragment: int, seed: int, row_bytes: int = 0) -> None:
        super().__init__(self._forever, repeat=False)
        self.step_s, self.fragment = step_s, fragment
        self.rng = np.random.default_rng(seed)
        self.weights = np.zeros((OBS_DIM, 2), dtype=np.float32)
        self.frames = np.zeros((fragment, row_bytes), dtype=np.uint8)

    def sample(self) -> SampleBatch:
        """``fragment`` env steps, sleeping ``step_s`` each (in one sleep)."""
        time.sleep(self.step_s * self.fragment)
        obs = self.rng.standard_normal((self.fragment, OBS_DIM), dtype=np.float32)
        actions = (obs @ self.weights).argmax(axis=1)
        columns = {OBS: obs, ACTIONS: actions, REWARDS: np.ones(self.fragment)}
        if self.frames.shape[1]:
            columns["frames"] = self.frames
        return SampleBatch(columns)

    def set_weights(self, weights: Any, global_vars: Any) -> None:
        """Take the learner's weights (a reference resolved by Ray)."""
        self.weights = weights

    def _forever(self) -> Iterator[SampleBatch]:
        while True:
            yield self.sample()


def _counted(batch: SampleBatch | BatchRef) -> SampleBatch | BatchRef:
    flow.current_metrics().counters[keys.NUM_ENV_STEPS_SAMPLED] += batch.count
    return batch


def gather_loop(workers: list[Any]) -> Any:
    """The async gather alone."""
    return flow.from_actors(workers).gather_async(num_async=2).for_each(_counted)


class PushEvery:
    """Send cached weights to a batch's worker every ``k`` of its batches (Ape-X's rule)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.seen: dict[Any, int] = {}
        self.ref = flow.put(np.ones((OBS_DIM, 2), dtype=np.float32))

    def __call__(self, item: ActorItem) -> ActorItem:
        n = self.seen.get(item.actor, 0) + 1
        self.seen[item.actor] = n % self.k
        if n == self.k:
            item.actor.set_weights.remote(self.ref, None)
        return item


def apex_loop(workers: list[Any]) -> Any:
    """Ape-X's store / replay / update loop, with no learner (the replay op's items count)."""
    shards = create_replay_shards(
        ReplayShardSpec(num_shards=4, capacity=100_000, prioritized=True, num_items=128, seed=0)
    )
    store = (
        flow.from_actors(workers)
        .gather_async(num_async=2)
        .for_each(_counted)
        .for_each(StoreToReplayBuffer(actors=shards, seed=0))
        .zip_with_source_actor()
        .for_each(PushEvery(4))
    )
    replays = replay(actors=shards, num_async=2)
    return concurrently([store, replays], mode="async", output_indexes=[0])


def impala_loop(workers: list[Any], fragment: int) -> Any:
    """IMPALA's enqueue / broadcast loop, a thread emptying the learner queue."""
    inqueue: queue.Queue[Any] = queue.Queue(maxsize=16)

    def drain() -> None:
        while True:
            inqueue.get()

    threading.Thread(target=drain, daemon=True).start()
    ref = flow.put(np.ones((OBS_DIM, 2), dtype=np.float32))

    def broadcast(item: ActorItem) -> ActorItem:
        item.actor.set_weights.remote(ref, None)
        return item

    return (
        flow.from_actors(workers)
        .gather_async(num_async=2)
        .for_each(_counted)
        .combine(ConcatBatches(4 * fragment))
        .for_each(Enqueue(inqueue))
        .zip_with_source_actor()
        .for_each(broadcast)
    )


class SimLearner:
    """A learner actor stand-in: fetches the fragments of each train batch it is handed."""

    def learn(self, batch: BatchRefs | SampleBatch) -> int:
        """Fetch and concatenate the batch (what a learner actor does first); its rows."""
        return (batch.resolve() if isinstance(batch, BatchRefs) else batch).count


def impala_refs_loop(workers: list[Any], fragment: int, *, by_reference: bool = True) -> Any:
    """IMPALA's loop with a learner actor: references through the driver, data to the learner
    (``by_reference=False``: the batches through the driver, concatenated and sent on)."""
    inqueue: queue.Queue[Any] = queue.Queue(maxsize=16)
    learner = flow.remote(SimLearner).options(num_cpus=0).remote()

    def feed() -> None:
        pending: Any = None
        try:
            while True:
                refs = inqueue.get()
                if pending is not None:
                    flow.get(pending)  # one batch in flight: backpressure, as the learner thread
                pending = learner.learn.remote(refs)
        except Exception:  # the size's workers were killed: this loop is over
            return

    threading.Thread(target=feed, daemon=True).start()
    ref = flow.put(np.ones((OBS_DIM, 2), dtype=np.float32))

    def broadcast(item: ActorItem) -> ActorItem:
        item.actor.set_weights.remote(ref, None)
        return item

    shards = flow.from_actors(workers)
    if by_reference:
        shards = shards.for_each(store_batch)  # on each worker: the batch stays in its store
    return (
        shards.gather_async(num_async=2)
        .for_each(_counted)
        .combine(ConcatBatches(4 * fragment))
        .for_each(Enqueue(inqueue))
        .zip_with_source_actor()
        .for_each(broadcast)
    )


def measure(build: Callable[[], Any], seconds: float, fragment: int) -> tuple[float, float]:
    """Batches/s of sampled fragments and driver CPU microseconds per fragment."""
    stream = build()
    next(stream)  # warm: actors answered once
    counters = stream.metrics.counters
    start_steps = counters[keys.NUM_ENV_STEPS_SAMPLED]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0, t0 = usage.ru_utime + usage.ru_stime, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        next(stream)
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu0
    batches = (counters[keys.NUM_ENV_STEPS_SAMPLED] - start_steps) / fragment
    stream.close()
    return batches / wall, 1e6 * cpu / max(batches, 1)


def main() -> None:
    """Parse the flags, start Ray, measure each size and loop, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="16,64,256")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--step-ms", type=float, default=2.0)
    parser.add_argument("--fragment", type=int, default=50)
    parser.add_argument("--row-bytes", type=int, default=0)
    parser.add_argument("--loops", default="gather,apex,impala,impala_values,impala_refs")
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    flow.init(backend="ray")
    step_s = args.step_ms / 1000.0
    loops: dict[str, Callable[[list[Any]], Any]] = {
        "gather": gather_loop,
        "apex": apex_loop,
        "impala": lambda w: impala_loop(w, args.fragment),
        "impala_refs": lambda w: impala_refs_loop(w, args.fragment),
        "impala_values": lambda w: impala_refs_loop(w, args.fragment, by_reference=False),
    }
    print(
        f"simulator: {args.step_ms} ms per step, {args.fragment} steps per batch, "
        f"{OBS_DIM * 4 + 16 + args.row_bytes} bytes per step"
    )
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            actor_cls = flow.remote(SimWorker).options(num_cpus=0)
            started = time.perf_counter()
            workers = [actor_cls.remote(step_s, args.fragment, i, args.row_bytes) for i in range(n)]
            flow.get([w.sample.remote() for w in workers])
            print(f"\n{n} workers (started in {time.perf_counter() - started:.1f}s)")
            ideal = n / (step_s * args.fragment)
            for name in args.loops.split(","):
                runs = [
                    measure(functools.partial(loops[name], workers), args.seconds, args.fragment)
                    for _ in range(args.rounds)
                ]
                rate = statistics.median(r[0] for r in runs)
                cost = statistics.median(r[1] for r in runs)
                print(
                    f"  {name:7s} {rate:8.0f} batches/s = {rate / ideal:5.2f} of the simulators' "
                    f"{ideal:.0f}; driver CPU {cost:6.0f} us/batch; load {os.getloadavg()[0]:.1f}"
                )
            for w in workers:
                flow.kill(w)
    finally:
        flow.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()

"""The paper's Spark comparison: a synchronous RL iteration on rlflow, plain Ray and Spark.

The microbenchmark of the RLlib Flow paper (Liang et al., NeurIPS 2021): 2 workers and a policy
of one trainable scalar; each iteration is

    rollout (size/2 env steps on each worker) -> postprocess (discounted returns, on the worker)
        -> concat (on the driver) -> train (one step on the scalar) -> new weights to the workers

at 10 / 100 / 1,000 / 10,000 env steps per iteration. The same work runs on

- rlflow: ``from_actors(workers).for_each(postprocess).gather_sync()
  .combine(ConcatBatches(size)).for_each(TrainScalarPolicy(workers))``;
- plain Ray, written by hand: ``ray.get`` of one call per worker on the same actor class;
- Spark (``local[2]``), the rollout and postprocess as the tasks of a job over 2 partitions,
  collected, concatenated and trained on the driver: a loop of batch RDD jobs (Spark's best
  case), a DStream (``queueStream`` + ``foreachRDD``, where pyspark still has
  ``pyspark.streaming``) and a Structured Streaming query (``rate-micro-batch`` source of one row
  per worker per micro-batch + ``foreachBatch``).

Prints env steps/s (items/s) of each, rlflow/Ray and rlflow/best Spark, per size and as
geometric means. Timings are medians of ``--rounds`` rounds. Within a round rlflow and Ray
run back to back as a pair, twice, in the order A B B A (A alternating from round to round),
each for ``--seconds`` after one untimed iteration; a round's rate of each is the mean of its
two runs, and rlflow/Ray is the median of the per-round ratios. Then every Spark variant runs
once (streams: timed after their first batch), in an order that rotates from round to round.
(With all five systems in one rotating order, rlflow ran right after a Spark variant in two of
three rounds and Ray right after rlflow: at 100 steps that read 0.63x, where alternating pairs
of the two alone read 1.04x on the same code.) The load average is printed with every round.
Needs Java and the ``bench`` extra (pyspark); without pyspark only rlflow and Ray run.

    python benchmarks/spark_comparison.py [--rounds 3] [--seconds 1.5] [--sizes 10,100,1000,10000]
        [--spark spark_rdd,spark_dstream,spark_structured] [--dstream-interval 0.01]
        [--out benchmarks/results/spark_comparison.jsonl] [--quick]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import ray

from rlflow import flow
from rlflow.data import SampleBatch
from rlflow.ops import ConcatBatches
from rlflow.returns import discounted_returns

GAMMA = 0.99
LEARNING_RATE = 0.01
NOISE_STD = 0.1
"""Std of the Gaussian exploration noise on the action."""
SIZES = (10, 100, 1_000, 10_000)
NUM_WORKERS = 2
DSTREAM_INTERVAL_S = 0.01
"""DStream batch interval (default of ``--dstream-interval``): shorter than any iteration here,
so batches run back to back."""


# -- the work, the same on every system -------------------------------------------------------


def rollout(theta: float, steps: int, rng: np.random.Generator) -> SampleBatch:
    """``steps`` env steps of the trivial env: obs ~ U(-1, 1), reward -(action - obs)^2."""
    obs = rng.uniform(-1.0, 1.0, steps)
    actions = theta * obs + NOISE_STD * rng.standard_normal(steps)
    rewards = -((actions - obs) ** 2)
    return SampleBatch({"obs": obs, "actions": actions, "rewards": rewards})


def postprocess(batch: SampleBatch) -> SampleBatch:
    """Add the discounted returns of the fragment (cut off: no bootstrap)."""
    batch["returns"] = discounted_returns(batch["rewards"], GAMMA)
    return batch


def sgd_step(theta: float, batch: SampleBatch) -> float:
    """One REINFORCE step on the scalar of the Gaussian policy ``a ~ N(theta * obs, NOISE_STD)``."""
    returns = batch["returns"]
    advantages = (returns - returns.mean()) / (returns.std() + 1e-8)
    score = (batch["actions"] - theta * batch["obs"]) * batch["obs"] / NOISE_STD**2
    return theta + LEARNING_RATE * float(np.mean(advantages * score))


class ScalarWorker(flow.ParallelIteratorWorker):
    """A rollout worker with the one-scalar policy; as a shard it samples forever."""

    def __init__(self, index: int) -> None:
        super().__init__(self._forever, repeat=False)
        self.theta = 0.0
        self.steps = 1
        self.rng = np.random.default_rng(index)

    def configure(self, steps: int) -> None:
        """Set the fragment length and reset the weights."""
        self.steps, self.theta = steps, 0.0

    def set_weights(self, theta: float) -> None:
        self.theta = theta

    def sample(self) -> SampleBatch:
        return rollout(self.theta, self.steps, self.rng)

    def sample_postprocessed(self) -> SampleBatch:
        """What the plain-Ray loop calls: the rlflow shard's two stages in one call."""
        return postprocess(self.sample())

    def _forever(self) -> Iterator[SampleBatch]:
        while True:
            yield self.sample()


class TrainScalarPolicy:
    """One ``sgd_step`` on the train batch, then the new weights to every worker.

    Items: ``SampleBatch -> float`` (the new theta). Use with ``.for_each``. Side effects: a
    ``set_weights`` call to each worker, not waited on (an actor runs its calls in order, so
    the next rollout sees the new weights).
    """

    def __init__(self, workers: list[Any]) -> None:
        self.workers = workers
        self.theta = 0.0

    def __call__(self, batch: SampleBatch) -> float:
        self.theta = sgd_step(self.theta, batch)
        for worker in self.workers:
            worker.set_weights.remote(self.theta)
        return self.theta


# -- rlflow and plain Ray ----------------------------------------------------------------------


def timed(step: Callable[[], Any], seconds: float) -> tuple[int, float]:
    """Call ``step`` once untimed, then until ``seconds`` have passed: (calls, elapsed)."""
    step()
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        step()
        n += 1
    return n, time.perf_counter() - start


def run_rlflow(workers: list[Any], size: int, seconds: float) -> float:
    ray.get([w.configure.remote(size // NUM_WORKERS) for w in workers])
    plan = (
        flow.from_actors(workers)
        .for_each(postprocess)
        .gather_sync()
        .combine(ConcatBatches(size))
        .for_each(TrainScalarPolicy(workers))
    )
    n, elapsed = timed(lambda: next(plan), seconds)
    plan.close()
    return n * size / elapsed


def run_ray(workers: list[Any], size: int, seconds: float) -> float:
    ray.get([w.configure.remote(size // NUM_WORKERS) for w in workers])
    train = TrainScalarPolicy(workers)

    def iteration() -> None:
        batches = ray.get([w.sample_postprocessed.remote() for w in workers])
        train(SampleBatch.concat_samples(batches))

    n, elapsed = timed(iteration, seconds)
    return n * size / elapsed


# -- Spark -------------------------------------------------------------------------------------


class SparkIteration:
    """The driver side of one iteration on Spark: roll out on the partitions of ``rdd``, collect,
    concat, train. The weights travel to the tasks in the job's closure."""

    def __init__(self, size: int) -> None:
        self.steps = size // NUM_WORKERS
        self.theta = 0.0
        self.iterations = 0

    def __call__(self, rdd: Any) -> None:
        theta, steps, seed = self.theta, self.steps, self.iterations

        def task(index: int, _rows: Iterator[Any]) -> Iterator[SampleBatch]:
            rng = np.random.default_rng((seed, index))
            yield postprocess(rollout(theta, steps, rng))

        batches = rdd.mapPartitionsWithIndex(task).collect()
        self.theta = sgd_step(self.theta, SampleBatch.concat_samples(batches))
        self.iterations += 1


class StreamTimer:
    """Counts iterations run in a streaming callback; times them after the first (warm-up)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start: float | None = None
        self.n = 0
        self.elapsed = 0.0
        self.done = threading.Event()

    def __call__(self, iteration: SparkIteration, rdd: Any) -> None:
        if self.done.is_set():
            return
        iteration(rdd)
        now = time.perf_counter()
        if self.start is None:
            self.start = now
            return
        self.n += 1
        self.elapsed = now - self.start
        if self.elapsed >= self.seconds:
            self.done.set()

    def rate(self, size: int, what: str) -> float:
        if not self.done.wait(timeout=self.seconds + 120):
            raise TimeoutError(f"{what}: no {self.seconds}s of iterations within 2 minutes")
        return self.n * size / self.elapsed


def worker_rdd(sc: Any) -> Any:
    """One partition per worker, from a ``range``: pyspark makes it a Python stage that the
    rollout's stage joins (a DStream hands it to ``foreachRDD`` unjoined: two chained Python
    workers per task). An RDD of a list took ~10x as long per job on this machine."""
    return sc.parallelize(range(NUM_WORKERS), NUM_WORKERS)


def run_spark_rdd(spark: Any, size: int, seconds: float) -> float:
    sc = spark.sparkContext
    iteration = SparkIteration(size)
    n, elapsed = timed(lambda: iteration(worker_rdd(sc)), seconds)
    return n * size / elapsed


def run_spark_dstream(spark: Any, size: int, seconds: float, interval_s: float) -> float:
    from pyspark.streaming import StreamingContext

    sc = spark.sparkContext
    ssc = StreamingContext(sc, interval_s)
    tasks = worker_rdd(sc)
    iteration, timer = SparkIteration(size), StreamTimer(seconds)
    stream = ssc.queueStream([], oneAtATime=True, default=tasks)
    stream.foreachRDD(lambda rdd: timer(iteration, rdd))
    ssc.start()
    try:
        return timer.rate(size, "DStream")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)


def run_spark_structured(spark: Any, size: int, seconds: float) -> float:
    checkpoint = tempfile.mkdtemp(prefix="spark_comparison_")
    source = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", NUM_WORKERS)
        .option("numPartitions", NUM_WORKERS)
        .load()
    )
    iteration, timer = SparkIteration(size), StreamTimer(seconds)
    query = (
        source.writeStream.foreachBatch(lambda df, _batch_id: timer(iteration, df.rdd))
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        return timer.rate(size, "Structured Streaming")
    finally:
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)


def start_spark(wanted: list[str] | None) -> tuple[Any, list[str]]:
    """A ``local[2]`` session and the Spark variants to run (those of ``wanted`` that this
    pyspark has; None: all); no session when there are none or pyspark is not installed."""
    if wanted == []:
        return None, []
    if importlib.util.find_spec("pyspark") is None:
        print("pyspark is not installed (pip install -e '.[bench]'): Spark is left out")
        return None, []
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyspark
    from pyspark.sql import SparkSession

    variants = ["spark_rdd", "spark_structured"]
    if importlib.util.find_spec("pyspark.streaming") is not None:
        variants.insert(1, "spark_dstream")
        dstream = "DStream (pyspark.streaming, deprecated since 3.4) is there"
    else:
        dstream = "no pyspark.streaming in this version: DStream left out"
    variants = [name for name in variants if wanted is None or name in wanted]
    spark = (
        SparkSession.builder.master(f"local[{NUM_WORKERS}]")
        .appName("spark_comparison")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(NUM_WORKERS))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    print(f"Spark {pyspark.__version__} local[{NUM_WORKERS}]; {dstream}; running {variants}")
    return spark, variants


# -- the rounds --------------------------------------------------------------------------------


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def warm_up(systems: dict[str, Callable[[int, float], float]]) -> None:
    """Run each system for a second, untimed: JIT-compiled JVM code, Spark's Python workers."""
    for run in systems.values():
        run(100, 1.0)


def bench_size(
    size: int, systems: dict[str, Callable[[int, float], float]], rounds: int, seconds: float
) -> dict[str, Any]:
    names = list(systems)
    rates: dict[str, list[float]] = {name: [] for name in names}
    loads = []
    spark = [name for name in names if name.startswith("spark")]
    for r in range(rounds):
        pair = ["rlflow", "ray"] if r % 2 == 0 else ["ray", "rlflow"]
        runs: dict[str, list[float]] = {name: [] for name in pair}
        for name in pair + pair[::-1]:  # A B B A: each as often first as last
            runs[name].append(systems[name](size, seconds))
        for name in pair:
            rates[name].append(statistics.fmean(runs[name]))
        for name in spark[r % len(spark) :] + spark[: r % len(spark)] if spark else []:
            rates[name].append(systems[name](size, seconds))
        loads.append(load())
        row = " ".join(f"{name} {rates[name][-1]:,.0f}" for name in names)
        print(f"  size {size:>6} round {r}: {row} items/s; load {loads[-1]}", flush=True)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    record: dict[str, Any] = {"size": size, "items_per_s": medians, "per_round": rates}
    record["rlflow_over_ray"] = statistics.median(
        f / b for f, b in zip(rates["rlflow"], rates["ray"], strict=True)
    )
    if spark:
        best = max(spark, key=lambda name: medians[name])
        record["best_spark"] = best
        record["rlflow_over_best_spark"] = medians["rlflow"] / medians[best]
    record["load"] = loads
    return record


def print_table(records: list[dict[str, Any]], names: list[str]) -> dict[str, float]:
    spark = [name for name in names if name.startswith("spark")]
    header = " ".join(f"{name:>17}" for name in names)
    print(f"\nenv steps/s (medians)\n{'size':>6} {header} {'rlflow/ray':>11} {'rlflow/spark':>13}")
    for rec in records:
        cells = " ".join(f"{rec['items_per_s'][name]:>17,.0f}" for name in names)
        vs_spark = f"{rec['rlflow_over_best_spark']:>12.1f}x" if spark else f"{'-':>13}"
        print(f"{rec['size']:>6} {cells} {rec['rlflow_over_ray']:>10.3f}x {vs_spark}")
    summary = {"rlflow_over_ray": geomean([r["rlflow_over_ray"] for r in records])}
    if spark:
        summary["rlflow_over_best_spark"] = geomean([r["rlflow_over_best_spark"] for r in records])
        for name in spark:
            ratios = [r["items_per_s"]["rlflow"] / r["items_per_s"][name] for r in records]
            summary[f"rlflow_over_{name}"] = geomean(ratios)
    print("geometric means: " + ", ".join(f"{k} {v:.2f}x" for k, v in summary.items()))
    return summary


def build_systems(
    spark: Any, variants: list[str], dstream_interval_s: float
) -> dict[str, Callable[[int, float], float]]:
    """``name -> run(size, seconds) -> items/s``: rlflow, Ray (on one pair of workers), Spark."""
    Worker = flow.remote(ScalarWorker)
    workers = [Worker.remote(i) for i in range(NUM_WORKERS)]
    systems: dict[str, Callable[[int, float], float]] = {
        "rlflow": lambda size, s: run_rlflow(workers, size, s),
        "ray": lambda size, s: run_ray(workers, size, s),
        "spark_rdd": lambda size, s: run_spark_rdd(spark, size, s),
        "spark_dstream": lambda size, s: run_spark_dstream(spark, size, s, dstream_interval_s),
        "spark_structured": lambda size, s: run_spark_structured(spark, size, s),
    }
    return {
        name: run
        for name, run in systems.items()
        if not name.startswith("spark") or name in variants
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.5, help="timed seconds per run")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="steps per iteration")
    parser.add_argument("--out", default=None, help="append JSON lines here")
    parser.add_argument("--quick", action="store_true", help="1 round of 0.3 s (a smoke test)")
    parser.add_argument(
        "--spark",
        default=None,
        help="Spark variants to run (default: all there are; '' for none), e.g. spark_rdd",
    )
    parser.add_argument(
        "--dstream-interval", type=float, default=DSTREAM_INTERVAL_S, help="seconds"
    )
    args = parser.parse_args()
    rounds, seconds = (1, 0.3) if args.quick else (args.rounds, args.seconds)
    sizes = [int(s) for s in args.sizes.split(",")]

    flow.init(backend="ray", num_cpus=NUM_WORKERS, include_dashboard=False, log_to_driver=False)
    wanted = None if args.spark is None else [n for n in args.spark.split(",") if n]
    spark, variants = start_spark(wanted)
    print(f"ray {ray.__version__}, {os.cpu_count()} cores, load {load()}")
    systems = build_systems(spark, variants, args.dstream_interval)
    warm_up(systems)

    records = [bench_size(size, systems, rounds, seconds) for size in sizes]
    summary = print_table(records, list(systems))
    if args.out:
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        meta = {"date": stamp, "cores": os.cpu_count(), "ray": ray.__version__}
        if spark is not None:
            meta["spark"] = spark.version
        meta |= {"num_rounds": rounds, "seconds": seconds}
        with open(args.out, "a") as f:
            for rec in records:
                f.write(json.dumps(meta | rec) + "\n")
            f.write(json.dumps(meta | {"summary": summary}) + "\n")
    if spark is not None:
        spark.stop()
    flow.shutdown()


if __name__ == "__main__":
    main()

"""Recorded experience: what writing costs a sampling worker, and how fast readers feed a learner.

- **Writer**: one rollout worker (PPO's default policy, ``--envs`` envs, fragments of
  ``--fragment`` steps) samples for ``--seconds`` with ``output`` off and on, in ``--rounds``
  interleaved rounds; prints rows/s of each (medians), the ratio, and the writer's own share
  (seconds encoding and writing, bytes per row). CartPole-v1 (4 floats an observation) and,
  with ale-py, ALE/Pong-v5 (84x84x4 uint8 frames).
- **Readers**: the CartPole rows just written, read by `rlflow.offline.read_experience` with 1
  and 2 shards on Ray (decode only: rows/s gathered), then BC's plan training on them (rows/s
  into its learner, default BC config; the reader in the learner's process on the local
  backend, a reader actor on Ray) beside the same learner fed the same batches from memory
  (the learner's own rate): the ratios are what reading costs BC.

    python benchmarks/offline_io.py [--seconds 5] [--rounds 3] [--envs 8] [--fragment 64]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from rlflow import flow
from rlflow.algorithms import BCConfig, PPOConfig, get_algorithm
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.config.offline import experience_files
from rlflow.offline import read_experience
from rlflow.ops import ConcatBatches, TrainOneStep
from rlflow.workers import RolloutWorker, WorkerSet


def sample_rate(env: str, output: str | None, args: argparse.Namespace) -> dict[str, float]:
    """Rows/s one worker samples (and writes, with ``output``) for ``args.seconds``."""
    config = PPOConfig(
        env=env,
        num_workers=0,
        num_envs_per_worker=args.envs,
        rollout_fragment_length=args.fragment,
        output=output,
        seed=0,
    )
    worker = RolloutWorker(config, PPOPolicy, worker_index=1)
    worker.sample()  # envs built, first inference compiled
    rows, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        rows += worker.sample().count
    worker.flush_output()
    seconds = time.perf_counter() - start
    stats = worker.output_stats()
    worker.stop()
    return {"rows_per_s": rows / seconds, "write_share": stats["seconds"] / seconds, **stats}


def writer_rows(env: str, args: argparse.Namespace, root: str) -> str:
    """Print the writer's cost on ``env``; return the folder of the last round's files."""
    plain, written, shares, sizes = [], [], [], []
    folder = root
    for r in range(args.rounds):
        plain.append(sample_rate(env, None, args)["rows_per_s"])
        folder = f"{root}/{env.replace('/', '-')}-{r}"
        out = sample_rate(env, folder, args)
        written.append(out["rows_per_s"])
        shares.append(out["write_share"])
        sizes.append(out["bytes"] / max(out["rows"], 1))
    p, w = statistics.median(plain), statistics.median(written)
    print(
        f"{env}: sampling {p:,.0f} rows/s, sampling + writing {w:,.0f} rows/s, ratio {w / p:.3f}; "
        f"writing took {statistics.median(shares):.1%} of the time, "
        f"{statistics.median(sizes):,.0f} bytes/row on disk"
    )
    return folder


def reader_rows(folder: str, shards: int, rows: int) -> float:
    """Rows/s ``read_experience`` gathers (decoded batches) with ``shards`` shards."""
    source = read_experience(experience_files(folder), num_shards=shards, seed=0)
    it = source.gather_async()
    next(it)
    got, start = 0, time.perf_counter()
    while got < rows:
        got += next(it).count
    return got / (time.perf_counter() - start)


def learner_rows(folder: str, seconds: float, from_memory: bool) -> float:
    """Rows/s BC's plan trains on the recorded rows: read by its plan, or (``from_memory``)
    the same batches from a list, through the same ConcatBatches and TrainOneStep."""
    config = BCConfig(env="CartPole-v1", input=folder, seed=0)
    workers = WorkerSet(config, get_algorithm("bc").policy_cls)
    try:
        if from_memory:
            source = read_experience(experience_files(folder), seed=0).gather_sync()
            batches = source.take(200)
            train: Any = (
                flow.from_iterable(batches * 1000)
                .combine(ConcatBatches(config.train_batch_size))
                .for_each(TrainOneStep(workers, sgd_minibatch_size=config.sgd_minibatch_size))
            )
        else:
            train = get_algorithm("bc").plan(workers, config.replace(evaluation_interval=0))
        next(train)
        trained = workers.local_worker().get_policy().update.num_grad_updates
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            next(train)
        elapsed = time.perf_counter() - start
        updates = workers.local_worker().get_policy().update.num_grad_updates - trained
        return updates * config.sgd_minibatch_size / elapsed
    finally:
        workers.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--fragment", type=int, default=64)
    parser.add_argument("--no-atari", action="store_true", help="CartPole only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        flow.init(backend="local")
        folder = writer_rows("CartPole-v1", args, root)
        if not args.no_atari:
            try:
                import ale_py  # noqa: F401
            except ImportError:
                print("ALE/Pong-v5: skipped (pip install rl-flow[atari])")
            else:
                writer_rows("ALE/Pong-v5", args, root)
        flow.shutdown()
        flow.init(backend="ray", num_cpus=2, include_dashboard=False)
        try:
            for shards in (1, 2):
                rate = reader_rows(folder, shards, 200_000)
                print(f"read_experience, {shards} shard(s) on Ray: {rate:,.0f} rows/s decoded")
            on_ray = learner_rows(folder, args.seconds, from_memory=False)
        finally:
            flow.shutdown()
        flow.init(backend="local")
        fed = learner_rows(folder, args.seconds, from_memory=False)
        memory = learner_rows(folder, args.seconds, from_memory=True)
        flow.shutdown()
        print(
            f"BC learner: {memory:,.0f} rows/s from memory; from the files {fed:,.0f} rows/s "
            f"read in the learner's process (local backend, ratio {fed / memory:.3f}), "
            f"{on_ray:,.0f} rows/s read by a reader actor (Ray, ratio {on_ray / memory:.3f})"
        )


if __name__ == "__main__":
    main()

"""ES throughput: evaluations per second and the driver's CPU per evaluation, by worker count.

Two parts, both running the real ES plan (`rlflow.algorithms.es.es_plan`: the noise table,
``perturbation_evaluations``, ``ESUpdate``, ``standard_metrics_reporting``) on Ray:

- ``real``: ``--workers`` (default 2, 4) real rollout workers evaluating ES's CartPole-v1 MLP
  (each episode played to its end with random parameters: ~20 steps). Baseline: one worker's
  evaluations per second measured in this process with no driver
  (``evaluate_perturbations`` called directly on a `RolloutWorker`), times the number of
  workers: what a free driver and free cores would give.
- ``simulated``: ``--sim`` (default 64, 128, 256) simulated workers standing in for rollout
  workers: each answers a request of k pairs after sleeping ``--episode-ms`` per episode (a slow
  simulator) with random returns of the request's shape. They live as threads of
  ``--sim-hosts`` (default 16) lightweight actors (``num_cpus=0``, no torch), each worker its
  own handle to the plan, so the driver makes one Ray call per worker and round as with real
  workers, without 256 processes of memory. The baseline is their own rate,
  ``N * 1000 / episode_ms`` evaluations per second: the ratio says whether the driver (one call
  per worker and round, the update's numpy) keeps up.

An evaluation is one episode (a pair is two). Driver CPU is this process's user + sys seconds
per evaluation over the measured iterations (the first iteration, which starts the workers and
makes the noise table, is not measured). Memory: each host actor is a process of about 70 MB.

    python benchmarks/es_throughput.py [--workers 2,4] [--sim 64,128,256] [--sim-hosts 16]
        [--iterations 5] [--pairs-per-worker 8] [--episode-ms 20] [--noise-size 10000000]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from typing import Any

import numpy as np

from rlflow import flow
from rlflow.algorithms.es import ESConfig, ESPolicy
from rlflow.algorithms.es.plan import es_plan
from rlflow.algorithms.perturbation.worker import (
    PerturbationRequest,
    PerturbationResult,
    evaluate_perturbations,
)
from rlflow.data.noise import SharedNoiseTable, install_noise
from rlflow.workers import RolloutWorker, WorkerMetrics, WorkerSet


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class SimESHost:
    """Simulated rollout workers for ES, one per thread of this actor:
    ``apply(fn, key, theta, request, sigma)`` sleeps ``episode_s`` per episode of the request
    and answers random returns of its shape."""

    def __init__(self, episode_s: float, seed: int) -> None:
        self.episode_s = episode_s
        self.seed = seed

    def apply(self, fn: Any, *args: Any) -> Any:
        """Answer an evaluation request (or take the noise table's reference)."""
        if getattr(fn, "__name__", "") == "install_noise":
            return None
        _key, _theta, request, _sigma = args
        k, e = len(request.noise_indices), request.eval_episodes
        time.sleep(self.episode_s * (2 * k + e))
        rng = np.random.default_rng([self.seed, request.seed])
        return PerturbationResult(
            np.asarray(request.noise_indices, dtype=np.int64),
            rng.normal(size=(k, 2)),
            np.full((k, 2), 20, dtype=np.int64),
            rng.normal(size=e),
            np.full(e, 20, dtype=np.int64),
        )

    def pop_metrics(self) -> WorkerMetrics:
        """No sampler: no episodes of its own."""
        return WorkerMetrics([], 0, 0)

    def ping(self) -> str:
        """Liveness."""
        return "ok"


class SimWorker:
    """One simulated worker as the plan sees it: a handle whose ``apply.remote`` calls its host
    (one Ray call per worker, as a real worker's)."""

    def __init__(self, host: Any) -> None:
        self.host = host
        self.apply = host.apply
        self.pop_metrics = host.pop_metrics


class SimWorkerSet:
    """What ES's plan asks of a `WorkerSet`, over simulated actors and a real local worker."""

    def __init__(self, config: ESConfig, actors: list[Any]) -> None:
        self._local = RolloutWorker(config, ESPolicy, worker_index=0)
        self._remote = actors

    def local_worker(self) -> RolloutWorker:
        return self._local

    def remote_workers(self) -> list[Any]:
        return list(self._remote)

    def healthy_workers(self) -> list[Any]:
        return list(self._remote)

    def num_healthy_workers(self) -> int:
        return len(self._remote)

    def worker_index(self, actor: Any) -> int:
        return self._remote.index(actor) + 1

    def on_recreate(self, fn: Any) -> None:
        del fn

    def learner_group(self) -> None:
        return None

    def stop(self) -> None:
        for host in {id(w.host): w.host for w in self._remote}.values():
            flow.kill(host)


def _config(workers: int, args: argparse.Namespace) -> ESConfig:
    pairs = workers * args.pairs_per_worker
    return ESConfig(
        env="CartPole-v1",
        num_workers=workers,
        num_cpus_per_worker=0,
        episodes_per_batch=2 * pairs,
        train_batch_size=1,
        eval_prob=0.0,
        noise_size=args.noise_size,
        observation_filter="NoFilter",
        model={"hidden": [16]},
    )


def _measure(plan: Any, iterations: int) -> tuple[float, float]:
    """Evaluations per second and driver CPU seconds per evaluation over ``iterations``."""
    first = next(plan)  # starts the workers' envs, makes the table
    start_eps = first["info"]["perturbations"]["pairs"]
    del start_eps
    wall, cpu, evaluations = time.perf_counter(), _cpu(), 0
    for _ in range(iterations):
        result = next(plan)
        evaluations += 2 * result["info"]["perturbations"]["pairs"]
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    return evaluations / wall, cpu / evaluations


def worker_rate(args: argparse.Namespace) -> float:
    """One real worker's evaluations per second with no driver (this process)."""
    config = _config(1, args)
    worker = RolloutWorker(config, ESPolicy, worker_index=1)
    table = SharedNoiseTable.create(args.noise_size, seed=config.noise_seed)
    install_noise(worker, table.key, table.array)
    theta = worker.get_policy().flat_weights()
    rng = np.random.default_rng(0)
    k = args.pairs_per_worker
    evaluate_perturbations(
        worker,
        table.key,
        theta,
        PerturbationRequest(table.sample_indices(rng, k, theta.size), 0, 0),
        config.noise_stdev,
    )
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < 3.0:
        request = PerturbationRequest(table.sample_indices(rng, k, theta.size), 0, n)
        evaluate_perturbations(worker, table.key, theta, request, config.noise_stdev)
        n += 2 * k
    return n / (time.perf_counter() - start)


def _row(kind: str, ws: Any, config: ESConfig, iterations: int, baseline: float) -> dict[str, Any]:
    """Run ES's plan over ``ws`` (stopped after); its table row."""
    plan = es_plan(ws, config)
    try:
        rate, cpu = _measure(plan, iterations)
    finally:
        plan.close()
        ws.stop()
    workers = config.num_workers
    return {"kind": kind, "workers": workers, "evals_per_s": rate, "cpu_ms": cpu * 1e3,
            "baseline": baseline}  # fmt: skip


def run_real(workers: int, args: argparse.Namespace, baseline: float) -> dict[str, Any]:
    """``workers`` real rollout workers; baseline: ``workers`` times one worker's own rate."""
    config = _config(workers, args)
    return _row("real", WorkerSet(config, ESPolicy), config, args.iterations, baseline * workers)


def run_simulated(workers: int, args: argparse.Namespace) -> dict[str, Any]:
    """``workers`` simulated workers on ``--sim-hosts`` actors; baseline: their own rate."""
    config = _config(workers, args)
    hosts_n = min(args.sim_hosts, workers)
    per_host = -(-workers // hosts_n)
    cls = flow.remote(SimESHost).options(num_cpus=0, max_concurrency=per_host)
    hosts = [cls.remote(args.episode_ms / 1000.0, i) for i in range(hosts_n)]
    flow.get([h.ping.remote() for h in hosts])
    ws = SimWorkerSet(config, [SimWorker(hosts[i % hosts_n]) for i in range(workers)])
    return _row("simulated", ws, config, args.iterations, workers * 1000.0 / args.episode_ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="2,4")
    parser.add_argument("--sim", default="64,128,256")
    parser.add_argument("--sim-hosts", type=int, default=16, help="actors the --sim workers share")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--pairs-per-worker", type=int, default=8)
    parser.add_argument("--episode-ms", type=float, default=20.0)
    parser.add_argument("--noise-size", type=int, default=10_000_000)
    args = parser.parse_args()
    flow.init("ray", include_dashboard=False)
    rows = []
    try:
        real = [int(w) for w in args.workers.split(",") if w]
        if real:
            baseline = worker_rate(args)
            rows += [run_real(w, args, baseline) for w in real]
        rows += [run_simulated(int(w), args) for w in args.sim.split(",") if w]
    finally:
        flow.shutdown()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"{'kind':<10} {'workers':>7} {'evals/s':>10} {'baseline/s':>11} {'ratio':>6} "
        f"{'driver CPU ms/eval':>19}"
    )
    for r in rows:
        print(
            f"{r['kind']:<10} {r['workers']:>7} {r['evals_per_s']:>10.0f} "
            f"{r['baseline']:>11.0f} {r['evals_per_s'] / r['baseline']:>6.2f} "
            f"{r['cpu_ms']:>19.3f}"
        )


if __name__ == "__main__":
    main()

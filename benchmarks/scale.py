"""Scale: throughput by number of cores, and the GPU learner against the CPU one (issue 22).

Three phases, one after the other, every measurement time-boxed to ``--seconds``:

1. **raw**: random-action stepping of the env (`sampling.raw_steps_per_s`: the vector env the
   workers build, ``num_envs_per_worker`` envs per process, nothing else) at 1, 2, 4, ..., N
   processes, and at every worker count of phase 2 too (N: ``os.cpu_count()``).
2. **plans**: IMPALA and APPO run by `rlflow.Trainer` on one Ray session
   (`impala_throughput.actor_learner_rates`) at 1, 2, 4, ..., N-2 rollout workers (the driver
   and its learner thread take the other two cores), the learner on the GPU (``num_gpus: 1``)
   when torch sees one, else on the CPU; plus, with a GPU, one IMPALA row with a CPU learner at
   the most workers. Frames/s sampled and trained, and sampled / raw at the same count.
3. **learners**: rows/s of one ``learn_on_batch`` step (`PolicyUpdate.learn_on_batch`: forward,
   backward, optimizer step) of the V-trace policy (`VTracePolicy`) at train batches of 128,
   512 and 2048 rows (``--quick``: 128, 512) and of the DQN policy at 512, on the CPU and
   (with a GPU) on the GPU, and GPU / CPU. Batches are real samples of a `RolloutWorker`,
   concatenated
   (`SampleBatch.concat_samples`) until they hold at least the batch size, so they have whatever
   columns and layout the sampler produces; rows/s counts the env steps of that batch (a
   V-trace batch's bootstrap rows, one per sequence, are no rows here).

Frames are env steps times the env's frame skip (4 for ``ALE/`` ids, built by
`rlflow.envs.make_atari`; 1 otherwise). Configs: the full run uses the GPU-sized tuned configs
(``tuned/gpu/ALE-Pong-v5.yaml``: 16 envs per worker, batches of 512, fragments of 32), with
``num_workers`` and ``num_gpus`` set per row; ``--quick`` uses the CartPole-v1 tuned configs at
1-2 processes and 1 worker with 2-second windows (about 30 s on 2 cores, most of it starting
processes). The iteration length is set to a quarter of the window so each row reads several
results. Start-up of each row (actors, envs, the first result) is outside its window.

Full run on a 16-core machine with one GPU: 6 raw rows, 11 plan rows and 8 learner rows; on an
H200 machine at ``--seconds 6`` it took 425 s (learners 40, raw 145, plans 239; results in
``benchmarks/README.md``); each phase's time and the total are printed at the end.
``--phases`` picks and orders the phases, ``--workers`` the plan rows' worker counts.

    python benchmarks/scale.py [--seconds 8] [--json rows.json] [--phases learners,raw,plans]
    python benchmarks/scale.py --quick [--json rows.json]
    python benchmarks/scale.py --seconds 5 --phases learners,plans --workers 14
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import queue
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from impala_throughput import actor_learner_rates
from rlflow import flow
from rlflow.algorithms import IMPALAConfig, get_algorithm, tuned_config
from rlflow.config import AlgorithmConfig
from rlflow.data import SampleBatch
from rlflow.ops.learner_thread import LearnerThread
from rlflow.policy import TorchPolicy
from rlflow.workers import RolloutWorker
from sampling import raw_steps_per_s


class Setup(NamedTuple):
    """What one run measures."""

    env: str
    """Env id of every phase."""
    hardware: str
    """Which tuned configs (`rlflow.config.files.TUNED_HARDWARE`): "gpu" full, "cpu" quick."""
    processes: list[int]
    """Raw-stepping process counts."""
    workers: list[int]
    """Rollout-worker counts of the plan rows."""
    batches: list[int]
    """V-trace learner batch sizes (rows)."""
    seconds: float
    """Window of each measurement."""
    gpu: bool
    """Whether torch sees a GPU: GPU learner rows and the CPU-learner comparison."""
    learner_actors: int = 0
    """With more than 0: IMPALA and APPO rows at the most workers with this many learner
    actors (``num_learners``; sharing the GPU if there is one) instead of the driver's
    learner thread, so the driver passes references only."""
    profile: str | None = None
    """A folder for each plan row's profile (py-spy of the driver, a ``top`` of every
    process), or None."""


class RawRow(NamedTuple):
    """Random-action stepping in ``processes`` processes."""

    processes: int
    frames_per_s: float


class PlanRow(NamedTuple):
    """An actor-learner plan at ``workers`` rollout workers, its learner on ``learner``, the
    workers' inference on ``inference``."""

    algo: str
    workers: int
    learner: str
    """Where the learner runs: "gpu" or "cpu" (the driver's learner thread), with
    "-N-actors" when it is N learner actors (``num_learners``)."""
    inference: str
    """Where the workers compute actions: "gpu" (``num_gpus_per_worker`` > 0) or "cpu"."""
    sampled_frames_per_s: float
    trained_frames_per_s: float
    sampled_over_raw: float
    """Sampled frames/s over raw stepping's at as many processes as workers."""
    train_batch_size: int
    """The config's: batches sampled before the window and trained in it (the learner queue's,
    the learner's, the one being concatenated) can put trained above sampled by a few of
    these per window."""


class LearnerRow(NamedTuple):
    """``learn_on_batch`` of ``policy``'s algorithm on ``device`` at ``batch`` rows asked."""

    policy: str
    device: str
    batch: int
    rows: int
    """Rows of the batch trained on (whole samples: at least ``batch``)."""
    rows_per_s: float
    gpu_over_cpu: float | None
    """On a GPU row: its rows/s over the CPU row's at the same batch."""
    thread_rows_per_s: float | None
    """V-trace only: rows/s through a kept-full `LearnerThread` (on a GPU its loader thread
    stages the next batch while one trains, as in the IMPALA/APPO plans); None for DQN."""


PHASES = ("raw", "plans", "learners")
"""The phases, in their default order."""


def geometric(n: int) -> list[int]:
    """1, 2, 4, ... below ``n``, then ``n`` (``n`` >= 1).

    >>> geometric(16), geometric(14), geometric(1)
    ([1, 2, 4, 8, 16], [1, 2, 4, 8, 14], [1])
    """
    counts = [1]
    while counts[-1] * 2 < n:
        counts.append(counts[-1] * 2)
    return counts if counts[-1] == n else [*counts, n]


def frame_skip(env_id: str) -> int:
    """Frames per env step: 4 for ``ALE/`` ids (`rlflow.envs.make_atari`'s skip), else 1."""
    return 4 if env_id.startswith("ALE/") else 1


def plan_config(
    algo: str,
    setup: Setup,
    workers: int,
    *,
    gpu: bool,
    worker_gpu: bool = True,
    learner_actors: int = 0,
) -> IMPALAConfig:
    """``algo``'s tuned config of the run at ``workers`` workers, its learner on the GPU or not
    (the config's ``num_gpus``, 1 if that is 0), its workers' inference as the config has it
    when ``worker_gpu`` and torch sees a GPU, else on the CPU; iterations of a quarter of the
    window. With ``learner_actors`` the learner is that many learner actors of one CPU each
    (``num_learners``), sharing one GPU when ``gpu``, and the driver handles references only."""
    tuned = tuned_config(algo, setup.env, hardware=setup.hardware)
    learner_gpus = (tuned.num_gpus or 1) if gpu else 0
    config = dataclasses.replace(
        tuned,
        num_workers=workers,
        num_gpus=0 if learner_actors else learner_gpus,
        num_learners=learner_actors,
        num_gpus_per_learner=learner_gpus / learner_actors if learner_actors else 0,
        num_gpus_per_worker=tuned.num_gpus_per_worker if worker_gpu and setup.gpu else 0,
        min_time_s_per_iteration=setup.seconds / 4,
        min_steps_per_iteration=0,
    )
    assert isinstance(config, IMPALAConfig)
    return config


def measure_raw(setup: Setup) -> dict[int, float]:
    """Raw frames/s at every process count of the run and every worker count."""
    envs = plan_config("impala", setup, 1, gpu=False).num_envs_per_worker
    counts = sorted(set(setup.processes) | set(setup.workers))
    skip = frame_skip(setup.env)
    rates = {}
    for n in counts:
        rates[n] = skip * raw_steps_per_s(envs, setup.seconds, processes=n, env_id=setup.env)
        print(f"  raw {n:>3} processes: {rates[n]:>10,.0f} frames/s", flush=True)
    return rates


def measure_plans(setup: Setup, raw: dict[int, float]) -> list[PlanRow]:
    """IMPALA and APPO at every worker count (learner on the GPU if there is one), and IMPALA
    with a CPU learner at the most workers when there is a GPU; with ``setup.learner_actors``,
    IMPALA and APPO at the most workers with that many learner actors; one Ray session for
    all. With ``setup.profile``, each row's window is profiled into that folder
    (`impala_throughput.actor_learner_rates`)."""
    most = setup.workers[-1]
    runs = [(algo, n, setup.gpu, True, 0) for algo in ("impala", "appo") for n in setup.workers]
    if setup.gpu:
        runs.append(("impala", most, False, True, 0))
        if plan_config("impala", setup, most, gpu=True).num_gpus_per_worker > 0:
            runs.append(("impala", most, True, False, 0))  # the workers' inference on the CPU
    if setup.learner_actors:
        runs += [(algo, most, setup.gpu, True, setup.learner_actors) for algo in ("impala", "appo")]
    skip, rows = frame_skip(setup.env), []
    num_cpus = max(os.cpu_count() or 1, most + 1 + setup.learner_actors)
    flow.init(backend="ray", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        for algo, n, gpu, worker_gpu, actors in runs:
            config = plan_config(
                algo, setup, n, gpu=gpu, worker_gpu=worker_gpu, learner_actors=actors
            )
            learner = ("gpu" if gpu else "cpu") + (f"-{actors}-actors" if actors else "")
            inference = "gpu" if config.num_gpus_per_worker > 0 else "cpu"
            profile = None
            if setup.profile:
                os.makedirs(setup.profile, exist_ok=True)
                profile = os.path.join(setup.profile, f"{algo}-{n}-{learner}-{inference}")
            rates = actor_learner_rates(algo, config, setup.seconds, profile=profile)
            sampled, trained = skip * rates.sampled, skip * rates.trained
            row = PlanRow(
                algo,
                n,
                learner,
                inference,
                sampled,
                trained,
                sampled / raw[n],
                config.train_batch_size,
            )
            rows.append(row)
            print(
                f"  {algo} {n:>3} workers, {learner} learner, {inference} inference: "
                f"{sampled:>10,.0f} frames/s",
                flush=True,
            )
    finally:
        flow.shutdown()
    return rows


class Samples(NamedTuple):
    """Real samples of one rollout worker and the spaces its policy was built on."""

    batches: list[SampleBatch]
    observation_space: Any
    action_space: Any

    def first(self, rows: int) -> SampleBatch:
        """The first whole samples, concatenated, that hold at least ``rows`` rows."""
        taken: list[SampleBatch] = []
        for sample in self.batches:
            taken.append(sample)
            if sum(s.env_steps() for s in taken) >= rows:
                break
        return SampleBatch.concat_samples(taken)


def real_samples(config: AlgorithmConfig, policy_cls: type[TorchPolicy], rows: int) -> Samples:
    """Samples of one CPU `RolloutWorker` of ``config`` until they hold ``rows`` rows."""
    worker = RolloutWorker(config, policy_cls, worker_index=1)
    try:
        batches: list[SampleBatch] = []
        while sum(b.env_steps() for b in batches) < rows:
            sample = worker.sample()
            assert isinstance(sample, SampleBatch)
            batches.append(sample)
        policy = worker.get_policy()
        return Samples(batches, policy.observation_space, policy.action_space)
    finally:
        worker.stop()


def thread_rows_per_s(worker: RolloutWorker, batch: SampleBatch, seconds: float) -> float:
    """Rows (env steps) per second of a `LearnerThread` over ``worker`` (prefetch as by default
    for its device) whose in-queue is kept full of ``batch``, over ``seconds`` (after two
    warm-up batches)."""
    learner = LearnerThread(worker, inqueue_size=4)
    learner.start()
    try:
        for _ in range(2):
            learner.inqueue.put(batch)
        for _ in range(2):
            learner.outqueue.get(timeout=120)
        done, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            learner.check()  # re-raises the thread's error
            with contextlib.suppress(queue.Full):
                learner.inqueue.put(batch, timeout=0.005)
            with contextlib.suppress(queue.Empty):
                while True:
                    learner.outqueue.get_nowait()
                    done += 1
        return done * batch.env_steps() / (time.perf_counter() - start)
    finally:
        learner.stop()


def rows_per_s(policy: TorchPolicy, batch: SampleBatch, seconds: float) -> float:
    """Rows (env steps) per second of ``policy.update.learn_on_batch(batch)`` over ``seconds``
    (after one warm-up step)."""
    policy.update.learn_on_batch(batch)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        policy.update.learn_on_batch(
            batch
        )  # its stats are floats: each step has finished on the GPU
        steps += 1
    if policy.device.type == "cuda":
        torch.cuda.synchronize()
    return steps * batch.env_steps() / (time.perf_counter() - start)


def learner_rows(
    algo: str, config: AlgorithmConfig, sizes: Sequence[int], setup: Setup
) -> list[LearnerRow]:
    """Rows/s of ``algo``'s policy at each batch size of ``sizes``, on the CPU and (with a GPU)
    on the GPU; each on half a window. Sampled with fragments of ``min(sizes)`` rows (8 steps
    x 16 envs on Pong), whatever ``config``'s fragment is."""
    spec = get_algorithm(algo)
    # Samples no larger than the smallest batch, so each batch is about its size.
    fragment = max(min(sizes) // config.num_envs_per_worker, 1)
    cpu = dataclasses.replace(config, num_gpus=0, rollout_fragment_length=fragment)
    samples = real_samples(cpu, spec.policy_cls, max(sizes))
    rows: list[LearnerRow] = []
    cpu_rates: dict[int, float] = {}
    for device in ["cpu", "gpu"] if setup.gpu else ["cpu"]:
        on_device = dataclasses.replace(cpu, num_gpus=1 if device == "gpu" else 0)
        # The learner as the plans hold it: the local worker (no envs: it does not sample)
        learner = RolloutWorker(on_device, spec.policy_cls, worker_index=0)
        policy = learner.get_policy()
        assert isinstance(policy, TorchPolicy)
        for size in sizes:
            batch = samples.first(size)
            rate = rows_per_s(policy, batch, setup.seconds / 2)
            cpu_rates.setdefault(size, rate)
            ratio = rate / cpu_rates[size] if device == "gpu" else None
            thread = thread_rows_per_s(learner, batch, setup.seconds / 2) if algo != "dqn" else None
            rows.append(LearnerRow(algo, device, size, batch.env_steps(), rate, ratio, thread))
            through = "" if thread is None else f", {thread:>10,.0f} through the learner thread"
            print(f"  {algo} learner on {device}, batch {size}: {rate:>10,.0f} rows/s{through}")
        learner.stop()
    return rows


def measure_learners(setup: Setup) -> list[LearnerRow]:
    """The V-trace learner at every batch size of the run, DQN's at 512."""
    vtrace = plan_config("impala", setup, 1, gpu=False)
    if setup.hardware == "cpu":
        dqn = tuned_config("dqn", setup.env)
    else:  # no GPU-tuned DQN ships: its defaults, sampled like the IMPALA workers
        dqn = get_algorithm("dqn").config_cls(
            env=setup.env, num_envs_per_worker=vtrace.num_envs_per_worker
        )
    return [
        *learner_rows("impala", vtrace, setup.batches, setup),
        *learner_rows("dqn", dqn, [512], setup),
    ]


def print_tables(
    setup: Setup, raw: dict[int, float], plans: list[PlanRow], learners: list[LearnerRow]
) -> None:
    """The three tables and their ratios."""
    print(f"\n{setup.env}: frame skip {frame_skip(setup.env)}, windows of {setup.seconds:g} s")
    print(f"{'raw random-action stepping':<34} {'processes':>9} {'frames/s':>12}")
    for n, rate in raw.items():
        print(f"{'':<34} {n:>9} {rate:>12,.0f}")
    print(
        f"\n{'plan':<8} {'workers':>7} {'learner':>7} {'inference':>9} {'sampled frames/s':>16} "
        f"{'trained frames/s':>16} {'sampled/raw':>11}"
    )
    for p in plans:
        print(
            f"{p.algo:<8} {p.workers:>7} {p.learner:>7} {p.inference:>9} "
            f"{p.sampled_frames_per_s:>16,.0f} {p.trained_frames_per_s:>16,.0f} "
            f"{p.sampled_over_raw:>11.2f}"
        )
    print(
        f"\n{'learner':<8} {'device':>6} {'batch':>6} {'rows':>6} {'rows/s':>12} {'gpu/cpu':>8} "
        f"{'thread rows/s':>14}"
    )
    for r in learners:
        ratio = "" if r.gpu_over_cpu is None else f"{r.gpu_over_cpu:.2f}"
        thread = "" if r.thread_rows_per_s is None else f"{r.thread_rows_per_s:,.0f}"
        print(
            f"{r.policy:<8} {r.device:>6} {r.batch:>6} {r.rows:>6} "
            f"{r.rows_per_s:>12,.0f} {ratio:>8} {thread:>14}"
        )


def plan_gpu_over_cpu(plans: Sequence[PlanRow]) -> float | None:
    """IMPALA's trained frames/s with the GPU learner over the CPU learner's, at the most
    workers (None without a GPU row)."""
    most = max((p.workers for p in plans), default=0)
    inference = next((p.inference for p in plans if p.algo == "impala" and p.learner == "gpu"), "")
    by_learner = {
        p.learner: p
        for p in plans
        if p.algo == "impala" and p.workers == most and p.inference == inference
    }
    if {"gpu", "cpu"} - set(by_learner):
        return None
    return by_learner["gpu"].trained_frames_per_s / by_learner["cpu"].trained_frames_per_s


def make_setup(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Setup:
    """The run's counts and configs: full (``ALE/Pong-v5``, the GPU-tuned configs, up to the
    machine's cores) or ``--quick`` (CartPole-v1, at most 2 processes and 1 worker), with the
    flags' worker counts, learner actors and profile folder (a bad flag: ``parser.error``)."""
    cores = os.cpu_count() or 1
    gpu = torch.cuda.is_available()
    if args.quick:
        setup = Setup(
            "CartPole-v1",
            "cpu",
            geometric(min(cores, 2)),
            [1],
            [128, 512],
            args.seconds or 2.0,
            gpu,
        )
    else:
        setup = Setup(
            "ALE/Pong-v5",
            "gpu",
            geometric(cores),
            geometric(max(cores - 2, 1)),
            [128, 512, 2048],
            args.seconds or 8.0,
            gpu,
        )
    actors = args.learner_actors if args.learner_actors is not None else int(gpu)
    if actors < 0:
        parser.error(f"--learner-actors={actors}: 0 or more")
    setup = setup._replace(learner_actors=actors, profile=args.profile)
    if args.workers:
        try:
            counts = sorted({int(n) for n in args.workers.split(",") if n.strip()})
        except ValueError:
            counts = []
        if not counts or counts[0] < 1:
            parser.error(f"--workers={args.workers!r}: positive integers, comma-separated")
        setup = setup._replace(workers=counts)
    return setup


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure, print the tables, write ``--json``; return what the JSON holds."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="CartPole-v1, 1-2 processes (~40 s)")
    parser.add_argument(
        "--seconds", type=float, default=None, help="window of each measurement (8; quick 2)"
    )
    parser.add_argument("--json", metavar="PATH", help="write every row here (after each phase)")
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"which phases, in this order, comma-separated (default {','.join(PHASES)})",
    )
    parser.add_argument(
        "--learner-actors",
        type=int,
        default=None,
        help="add IMPALA and APPO rows at the most workers with this many learner actors "
        "(num_learners; default 1 with a GPU, else 0)",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="profile each plan row's window into DIR: py-spy of the driver (collapsed "
        "stacks, by thread) and a top of every process",
    )
    parser.add_argument(
        "--workers",
        default=None,
        help="rollout-worker counts of the plan rows, comma-separated (default 1, 2, 4, ... "
        "up to the cores less two; quick: 1)",
    )
    args = parser.parse_args(argv)
    order = [name.strip() for name in args.phases.split(",") if name.strip()]
    unknown = sorted(set(order) - set(PHASES))
    if unknown or not order:
        parser.error(f"--phases: unknown {unknown or 'empty'}; allowed: {', '.join(PHASES)}")
    setup = make_setup(args, parser)
    start = time.perf_counter()
    print(
        f"{setup.env}: raw at {setup.processes} processes, plans at {setup.workers} workers, "
        f"learner {'gpu and cpu' if setup.gpu else 'cpu'}; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    phases: dict[str, float] = {}
    raw: dict[int, float] = {}
    plans: list[PlanRow] = []
    learners: list[LearnerRow] = []
    out: dict[str, Any] = {}
    for phase in order:
        began = time.perf_counter()
        if phase == "raw":
            raw = measure_raw(setup)
        elif phase == "plans":
            # sampled/raw needs the raw rate at every worker count: measured first if not asked
            raw = raw or measure_raw(setup._replace(processes=[]))
            plans = measure_plans(setup, raw)
        else:
            learners = measure_learners(setup)
        phases[phase] = time.perf_counter() - began
        out = results(setup, raw, plans, learners, phases, time.perf_counter() - start)
        if args.json:  # after every phase, so a run cut short keeps what it measured
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    print_tables(setup, raw, plans, learners)
    ratio = out["impala_gpu_over_cpu_learner"]
    if ratio is not None:
        print(
            f"impala at {max(p.workers for p in plans)} workers, trained frames/s, "
            f"GPU / CPU learner: "
            f"{ratio:.2f}"
        )
    spent = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in phases.items())
    print(f"total {out['total_s']:.0f} s ({spent}); load {os.getloadavg()[0]:.1f}")
    return out


def results(
    setup: Setup,
    raw: dict[int, float],
    plans: list[PlanRow],
    learners: list[LearnerRow],
    phases: dict[str, float],
    total: float,
) -> dict[str, Any]:
    """What ``--json`` holds: every row so far, the phases' seconds and the total."""
    return {
        "env": setup.env,
        "seconds": setup.seconds,
        "cpu_count": os.cpu_count(),
        "gpu": torch.cuda.get_device_name() if setup.gpu else None,
        "raw": [RawRow(n, rate)._asdict() for n, rate in raw.items()],
        "plans": [p._asdict() for p in plans],
        "learners": [r._asdict() for r in learners],
        "impala_gpu_over_cpu_learner": plan_gpu_over_cpu(plans),
        "phase_s": dict(phases),
        "total_s": total,
    }


if __name__ == "__main__":
    main()

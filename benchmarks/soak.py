"""Chaos soak: IMPALA and Ape-X on a multi-node local Ray cluster while actors are killed.

For each algorithm, one run of ``--minutes`` on a ``ray.cluster_utils.Cluster`` of ``--nodes``
nodes started here. The driver is a separate process, ``rlflow train ALGO --address ...`` (two
learner actors, ``num_learners=2``), and this script, connected to the same cluster, runs a chaos
thread: every 10-60 s (uniform) it picks a kind of actor at random (rollout worker, replay shard
for Ape-X, learner actor) and one live actor of that kind that the driver started, and
SIGKILLs its process (found by class name and job in Ray's actor table). Once, between 40% and
60% of the run, it SIGTERMs the driver (which saves a checkpoint and exits 143) and starts it
again with ``--restore``. No kill in the ``--quiet-tail`` seconds before the SIGTERM and before
the end, nor while the driver is down or starting, so every kill is seen by a live driver. A
learner is killed only while another one is alive (a learner restarts from a live peer's
state).

Reported, and written to ``benchmarks/results/soak.jsonl`` (one row per algorithm):

1. the learning target: the best ``episode_return_mean`` against the learning tests' targets
   (IMPALA 400, Ape-X 300);
2. kills by kind against the results' counts (``num_worker_restarts``,
   ``num_replay_shard_restarts``, ``num_learner_restarts`` of the last result);
3. the driver's RSS (psutil) and the object store's bytes in use (the cluster-wide store stats
   that ``ray memory --stats-only`` prints), sampled every ``--sample-s`` seconds: the slope of a
   least-squares line after each driver's first 2 minutes, in MiB/min;
4. processes that outlive the run: every process seen under this one (the cluster's GCS,
   raylets and their workers, the driver), or naming the cluster's session dir, that is still
   alive 10 s after the cluster was shut down;
5. the restore check: the driver's exit status (143), the checkpoint the SIGTERM wrote
   against the last result before it and the restored driver's first result (iteration, env
   steps, every counter: none went back).

Run (the full soak, about 45 minutes for both)::

    python benchmarks/soak.py --minutes 20 --algos impala,apex

With ``PYTHONPATH=src``; ``--out DIR`` keeps the run dirs and logs (default a temporary dir).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# isort: off
import ray  # puts the psutil Ray ships (vendored) on sys.path
import psutil

# isort: on

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
RESULTS = ROOT / "benchmarks" / "results" / "soak.jsonl"

KINDS = {"RolloutWorker": "rollout worker", "ReplayActor": "replay shard", "Learner": "learner"}
"""Ray actor class name -> the kind of kill."""
RESULT_KEYS = {
    "RolloutWorker": "num_worker_restarts",
    "ReplayActor": "num_replay_shard_restarts",
    "Learner": "num_learner_restarts",
}
"""Ray actor class name -> the result key that should count its kills."""
ALGOS: dict[str, dict[str, Any]] = {
    # The learning tests' targets (rlflow.testing.learning.ASYNC_TARGETS).
    "impala": {"target": 400.0, "kinds": ["RolloutWorker", "Learner"]},
    "apex": {"target": 300.0, "kinds": ["RolloutWorker", "ReplayActor", "Learner"]},
}
WARMUP_S = 120.0
"""Samples of a driver's first 2 minutes are left out of the slopes."""
MIB = 1024 * 1024


@dataclass
class Soak:
    """What one algorithm's soak saw."""

    algo: str
    kills: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    seen: dict[int, float] = field(default_factory=dict)  # pid -> create_time
    events: list[str] = field(default_factory=list)


class Driver:
    """One ``rlflow train`` process of the run (the first, or the restored one)."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.started = time.monotonic()

    def rss(self) -> int | None:
        try:
            return int(psutil.Process(self.proc.pid).memory_info().rss)
        except psutil.Error:
            return None


def progress(run_dir: Path) -> list[dict[str, Any]]:
    """The results written so far (complete lines only)."""
    path = run_dir / "progress.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line being written
    return rows


def alive_actors(classes: list[str], driver_pid: int) -> list[dict[str, Any]]:
    """Live actors of ``classes`` that the driver process ``driver_pid`` started, from the
    cluster's actor and job tables (the GCS's; Ray's state API needs the dashboard, which this
    cluster runs without). Another process that joined the cluster keeps its actors."""
    jobs = {j["JobID"] for j in ray._private.state.jobs() if j["DriverPid"] == driver_pid}
    table = ray._private.state.actors()
    return [
        a
        for a in table.values()
        if a["State"] == "ALIVE" and a["ActorClassName"] in classes and a["JobID"] in jobs
    ]


def object_store_bytes(address: str) -> int:
    """Bytes in use in the object stores of every node (what ``ray memory --stats-only``
    reports)."""
    from ray._private.internal_api import get_memory_info_reply, get_state_from_address

    reply = get_memory_info_reply(get_state_from_address(address))
    return int(reply.store_stats.object_store_bytes_used)


def slope_mib_per_min(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(seconds, bytes)`` in MiB per minute; None under 3 points."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    sxx = sum((t - mx) ** 2 for t, _ in points)
    sxy = sum((t - mx) * (v - my) for t, v in points)
    return (sxy / sxx) * 60.0 / MIB if sxx else None


def note_processes(soak: Soak) -> None:
    """Remember every process under this one (the cluster's, the driver's)."""
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            soak.seen.setdefault(p.pid, p.create_time())


def leftovers(soak: Soak, session_dir: str) -> list[str]:
    """Processes seen during the run, or naming its session dir, that are still alive."""
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "create_time", "name"]):
        try:
            mine = soak.seen.get(p.pid) == p.info["create_time"]
            named = session_dir in " ".join(p.info["cmdline"] or [])
            if (mine or named) and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {p.info['name']}")
        except psutil.Error:
            pass
    return left


class Chaos(threading.Thread):
    """Kills a random actor every 10-60 s while ``active`` is set (the module docstring)."""

    def __init__(self, soak: Soak, classes: list[str], rng: random.Random, until: float) -> None:
        super().__init__(name="chaos", daemon=True)
        self.soak, self.classes, self.rng, self.until = soak, classes, rng, until
        self.active = threading.Event()
        self.done = threading.Event()
        self.driver_pid = 0  # the current driver's (its actors are the ones killed)

    def run(self) -> None:
        while not self.done.wait(self.rng.uniform(10.0, 60.0)):
            if time.monotonic() >= self.until:
                return
            if self.active.is_set():
                self.kill_one()

    def kill_one(self) -> None:
        actors = alive_actors(self.classes, self.driver_pid)
        by_kind = {c: [a for a in actors if a["ActorClassName"] == c] for c in self.classes}
        if len(by_kind.get("Learner", [])) < 2:  # one learner left: nothing to restart from
            by_kind.pop("Learner", None)
        kinds = [c for c, found in by_kind.items() if found]
        if not kinds:
            return
        kind = self.rng.choice(kinds)
        victim = self.rng.choice(by_kind[kind])
        try:
            os.kill(int(victim["Pid"]), signal.SIGKILL)
        except ProcessLookupError:
            return
        self.soak.kills.append(
            {"t": time.time(), "kind": kind, "pid": victim["Pid"], "actor": victim["ActorID"]}
        )
        print(f"  chaos: killed {KINDS[kind]} pid {victim['Pid']}", flush=True)


def wait_for_results(run_dir: Path, count: int, driver: Driver, timeout_s: float) -> bool:
    """Wait until ``progress.jsonl`` has more than ``count`` rows (False: the driver ended or
    the time ran out first)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(progress(run_dir)) > count:
            return True
        if driver.proc.poll() is not None:
            return False
        time.sleep(1.0)
    return False


def checkpoint_counters(run_dir: Path) -> dict[str, Any]:
    """The latest checkpoint's metadata and counters."""
    from rlflow.checkpoint import latest_checkpoint, load_checkpoint

    path = latest_checkpoint(run_dir)
    meta = json.loads((Path(path) / "rlflow_checkpoint.json").read_text())
    state = load_checkpoint(path)
    counters = dict(state["metrics"]["counters"])
    return {"path": str(path), "meta": meta, "counters": counters}


def restore_check(
    before: dict[str, Any], ckpt: dict[str, Any], after: dict[str, Any]
) -> dict[str, Any]:
    """The checkpoint against the last result before the SIGTERM and the restored driver's
    first result."""
    gone_back = sorted(
        k
        for k, v in ckpt["counters"].items()
        if isinstance(v, int | float) and after["counters"].get(k, 0) < v
    )
    check = {
        "last_iteration_before": before["iteration"],
        "checkpoint_iteration": ckpt["meta"]["iteration"],
        "first_iteration_after": after["iteration"],
        "last_sampled_before": before["num_env_steps_sampled"],
        "checkpoint_sampled": ckpt["counters"].get("num_env_steps_sampled"),
        "first_sampled_after": after["num_env_steps_sampled"],
        "episodes_before": before["episodes_total"],
        "checkpoint_episodes": ckpt["counters"].get("num_episodes"),
        "first_episodes_after": after["episodes_total"],
        "counters_gone_back": gone_back,
    }
    check["ok"] = (
        check["checkpoint_iteration"] >= check["last_iteration_before"]
        and check["first_iteration_after"] == check["checkpoint_iteration"] + 1
        and check["checkpoint_sampled"] >= check["last_sampled_before"]
        and check["first_sampled_after"] >= check["checkpoint_sampled"]
        and not gone_back
    )
    return check


def start_cluster(nodes: int, cpus: int) -> Any:
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": cpus, "include_dashboard": False}
    )
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=cpus)
    cluster.wait_for_nodes()
    return cluster


def run_one(algo: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One algorithm's soak; its row of results."""
    spec = ALGOS[algo]
    soak = Soak(algo)
    rng = random.Random(args.seed)
    run_dir = out / f"{algo}_run"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("RAY_ADDRESS", None)
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]  # the cluster's workers import rlflow
    wall_start = time.monotonic()
    cluster = start_cluster(args.nodes, args.cpus_per_node)
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    session_dir = ray._private.worker._global_node.get_session_dir_path()
    print(f"{algo}: cluster of {args.nodes} nodes at {cluster.address} ({session_dir})")
    run = Run(algo, run_dir, out, env, cluster.address)
    first_cmd = [
        *run.base, algo, "--env", "CartPole-v1", "--seed", str(args.seed), "--out", str(run_dir),
        "--stop-time", str(args.minutes * 60), *run.common,
        "--set", "num_learners=2", "--set", "num_cpus_per_learner=0",
        "--set", "placement_strategy=SPREAD",
    ]  # fmt: skip
    end_at = wall_start + args.minutes * 60 + 120  # the run's time plus start-up and restore
    chaos = Chaos(soak, spec["kinds"], rng, until=end_at)
    term_at = args.minutes * 60 * rng.uniform(0.4, 0.6)
    run.drivers.append(Driver(first_cmd, out / f"{algo}_driver1.log", env))
    try:
        chaos.driver_pid = run.drivers[0].proc.pid
        chaos.start()
        if not wait_for_results(run_dir, 0, run.drivers[0], 600):
            raise RuntimeError(f"{algo}: the driver gave no result (see its log)")
        chaos.active.set()
        run_start = time.monotonic()
        chaos.until = run_start + args.minutes * 60 - args.quiet_tail
        next_sample = 0.0
        while True:
            driver = run.drivers[-1]
            now = time.monotonic()
            if now >= next_sample:
                next_sample = now + args.sample_s
                sample(soak, driver, len(run.drivers), now - run_start, cluster.address)
            if driver.proc.poll() is not None:
                run.exits.append(driver.proc.returncode)
                break
            if not run.restore and now - run_start >= term_at - args.quiet_tail:
                chaos.active.clear()  # the stopping driver must have seen every kill
            if not run.restore and now - run_start >= term_at:
                print(f"  SIGTERM to the driver at {now - run_start:.0f}s", flush=True)
                terminate_and_restore(run, chaos)
            if now > end_at + 600:
                raise RuntimeError(f"{algo}: the driver did not stop")
            time.sleep(1.0)
    finally:
        chaos.done.set()
        for d in run.drivers:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
        note_processes(soak)
        ray.shutdown()
        cluster.shutdown()
    time.sleep(10.0)
    left = leftovers(soak, session_dir)
    return summarize(soak, spec, progress(run_dir), run.restore, run.exits, left, args)


@dataclass
class Run:
    """One algorithm's run: its drivers, their exit statuses and the restore check."""

    algo: str
    run_dir: Path
    out: Path
    env: dict[str, str]
    address: str
    drivers: list[Driver] = field(default_factory=list)
    exits: list[int] = field(default_factory=list)
    restore: dict[str, Any] = field(default_factory=dict)
    base: list[str] = field(default_factory=lambda: [sys.executable, "-m", "rlflow", "train"])

    @property
    def common(self) -> list[str]:
        """Flags of both drivers."""
        return ["--address", self.address, "--logger", "jsonl"]


def sample(soak: Soak, driver: Driver, number: int, t: float, address: str) -> None:
    """One sample of the driver's RSS and the object store's bytes in use."""
    note_processes(soak)
    soak.samples.append(
        {
            "t": t,
            "driver": number,
            "driver_t": time.monotonic() - driver.started,
            "rss": driver.rss(),
            "store": object_store_bytes(address),
        }
    )


def terminate_and_restore(run: Run, chaos: Chaos) -> None:
    """SIGTERM the driver, wait for its exit, start it again with ``--restore``, wait for its
    first result and check it against the checkpoint (``run.restore``)."""
    started = time.monotonic()
    chaos.active.clear()
    before = progress(run.run_dir)[-1]
    driver = run.drivers[-1]
    driver.proc.send_signal(signal.SIGTERM)
    run.exits.append(driver.proc.wait(timeout=300))
    ckpt = checkpoint_counters(run.run_dir)
    count = len(progress(run.run_dir))
    restored_cmd = [*run.base, "--restore", str(run.run_dir), *run.common]
    run.drivers.append(Driver(restored_cmd, run.out / f"{run.algo}_driver2.log", run.env))
    chaos.driver_pid = run.drivers[-1].proc.pid
    if not wait_for_results(run.run_dir, count, run.drivers[-1], 600):
        raise RuntimeError(f"{run.algo}: the restored driver gave no result")
    check = restore_check(before, ckpt, progress(run.run_dir)[count])
    check["driver_exit"] = run.exits[-1]
    check["ok"] = check["ok"] and run.exits[-1] == 143  # SIGTERM's status
    check["down_s"] = time.monotonic() - started
    run.restore = check
    print(f"  restored: {check}", flush=True)
    chaos.active.set()


def summarize(
    soak: Soak,
    spec: dict[str, Any],
    rows: list[dict[str, Any]],
    restore: dict[str, Any],
    rc: list[int],
    left: list[str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The row of results for one algorithm (and print it)."""
    last = rows[-1]
    returns = [r["episode_return_mean"] for r in rows if r.get("episode_return_mean") is not None]
    best = max(returns, default=None)
    reached = next(
        (r for r in rows if (r.get("episode_return_mean") or 0.0) >= spec["target"]), None
    )
    kills = {KINDS[c]: sum(k["kind"] == c for k in soak.kills) for c in spec["kinds"]}
    counted = {KINDS[c]: last.get(RESULT_KEYS[c]) for c in spec["kinds"]}
    slopes: dict[str, Any] = {}
    for n in sorted({s["driver"] for s in soak.samples}):
        late = [s for s in soak.samples if s["driver"] == n and s["driver_t"] >= WARMUP_S]
        rss = [(s["t"], s["rss"]) for s in late if s["rss"] is not None]
        store = [(s["t"], s["store"]) for s in late]
        slopes[f"driver{n}"] = {
            "minutes": (late[-1]["t"] - late[0]["t"]) / 60 if late else 0.0,
            "rss_mib_per_min": slope_mib_per_min(rss),
            "store_mib_per_min": slope_mib_per_min(store),
            "rss_mib_first_last": [rss[0][1] / MIB, rss[-1][1] / MIB] if rss else None,
            "store_mib_first_last": [store[0][1] / MIB, store[-1][1] / MIB] if store else None,
        }
    row = {
        "algo": soak.algo,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "minutes": args.minutes,
        "nodes": args.nodes,
        "seed": args.seed,
        "loadavg": os.getloadavg(),
        "target": spec["target"],
        "best_return": best,
        "reached_at_steps": None if reached is None else reached["num_env_steps_sampled"],
        "final": {
            k: last.get(k)
            for k in (
                "iteration",
                "num_env_steps_sampled",
                "num_env_steps_trained",
                "time_total_s",
                "episode_return_mean",
                "num_healthy_workers",
            )
        },
        "kills": kills,
        "counted": counted,
        "driver_exits": rc,
        "slopes": slopes,
        "leftover_processes": left,
        "restore": restore,
        "kill_log": soak.kills,
        "samples": [  # [s since the first result, driver, RSS MiB, object store MiB]
            [round(s["t"], 1), s["driver"], _mib(s["rss"]), _mib(s["store"])] for s in soak.samples
        ],
    }
    print(
        f"{soak.algo}: best return {best} (target {spec['target']}, reached at "
        f"{row['reached_at_steps']} steps); {last['num_env_steps_sampled']} steps in "
        f"{last['iteration']} iterations; driver exits {rc}"
    )
    for kind in kills:
        print(f"  kills of {kind}: {kills[kind]}, counted in results: {counted[kind]}")
    for name, s in slopes.items():
        print(
            f"  {name} after its first 2 min ({s['minutes']:.1f} min): RSS slope "
            f"{_fmt(s['rss_mib_per_min'])} MiB/min ({_pair(s['rss_mib_first_last'])} MiB), "
            f"object store slope {_fmt(s['store_mib_per_min'])} MiB/min "
            f"({_pair(s['store_mib_first_last'])} MiB)"
        )
    print(f"  processes left after the cluster stopped: {len(left)} {left}")
    print(f"  restore check: {'ok' if restore.get('ok') else 'FAILED'} {restore}")
    return row


def _mib(x: int | None) -> float | None:
    return None if x is None else round(x / MIB, 2)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def _pair(p: list[float] | None) -> str:
    return "n/a" if p is None else f"{p[0]:.1f} -> {p[1]:.1f}"


def main() -> None:
    """Parse, soak each algorithm in turn, append the rows to the results file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--algos", default="impala,apex")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--cpus-per-node", type=int, default=2)
    parser.add_argument("--sample-s", type=float, default=10.0)
    parser.add_argument("--quiet-tail", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    algos = [a for a in args.algos.split(",") if a]
    unknown = [a for a in algos if a not in ALGOS]
    if unknown:
        parser.error(f"--algos: {unknown} not among {sorted(ALGOS)}")
    out = args.out or Path(tempfile.mkdtemp(prefix="rlflow-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    for algo in algos:
        row = run_one(algo, args, out)
        args.results.parent.mkdir(parents=True, exist_ok=True)
        with args.results.open("a") as fh:
            fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

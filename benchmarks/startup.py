"""Start-up: the whole ``rlflow train ppo --env CartPole-v1 --stop-iters 1`` command, and where
its time goes.

Three variants, each measured in ``--rounds`` paired rounds (each round runs every variant once,
in turn; medians are printed), with the load average printed per round:

- ``local``: ``--backend local``; floor ``python -c "import torch, gymnasium"``.
- ``ray``: ``--backend ray`` (Ray started and stopped by the command); floor a bare
  ``python -c "import ray; ray.init(); ray.shutdown()"``.
- ``ray-auto``: a Ray that runs already: ``ray start --head --num-cpus 2
  --include-dashboard=false`` once per round, the command with ``--address auto``, then that Ray
  stopped (so the other variants never run beside an idle Ray); floor
  ``ray.init(address="auto"); ray.shutdown()``. On a shared machine the head gets its own
  ``--temp-dir`` (so nobody else's ``ray.init()`` joins it) and ``RAY_ADDRESS`` names it (so
  ``auto`` cannot find somebody else's Ray), with ``RAY_AUTH_MODE=token`` (which ``auto`` turns
  on by itself); it is stopped by killing its own processes (those naming its temp dir, and
  their children), not with ``ray stop``, which stops every Ray on the machine.

Two measurements per variant:

- **command**: wall seconds of the CLI as a user runs it (a fresh process), beside its floor;
  the difference is what rlflow adds. Also its CPU seconds (user + system) with those of every
  process it started (a Ray it started, that Ray's workers: this process is their subreaper,
  so the ones that outlive the command are counted too); with a running Ray (``ray-auto``),
  what that Ray's processes used meanwhile (the workers it started for the command, counted
  when its raylet reaps them). On a 2-core machine the wall time cannot go below half of them,
  however the work is overlapped.
- **breakdown** (a fresh process, the same run driven from Python with each phase timed):
  importing torch, then rlflow; resolving the config (``resolve_setup``: the typed config and
  the env names); building the learner's worker on the driver (one probe env and the policy:
  the env check); starting the backend (``ray.init``); reserving the placement group; creating
  the remote workers; building the plan; the remote workers ready (their first call answered);
  the first ``train()`` (and whether ``torch._dynamo`` got imported: it costs about as long as
  torch, and rlflow's Adam avoids it); the checkpoint (``Trainer.save``); stopping the workers;
  shutting the backend down.

Every process runs with bytecode caches (kept in a temporary directory, written by an uncounted
warm-up round), as an installed rlflow has them; ``--no-bytecode-cache`` runs them with
``PYTHONDONTWRITEBYTECODE=1`` instead.

    python benchmarks/startup.py [--rounds 3] [--variants local,ray,ray-auto] [--no-bytecode-cache]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PY = sys.executable
BIN = Path(PY).parent
RLFLOW = str(BIN / "rlflow")
RAY = str(BIN / "ray")
COMMAND = ["train", "ppo", "--env", "CartPole-v1", "--stop-iters", "1"]
VARIANTS: dict[str, list[str]] = {
    "local": ["--backend", "local"],
    "ray": ["--backend", "ray"],
    "ray-auto": ["--backend", "ray", "--address", "auto"],
}
"""Variant -> the command's backend flags."""
FLOORS = {
    "local": ["-c", "import torch, gymnasium"],
    "ray": ["-c", "import ray; ray.init(); ray.shutdown()"],
    "ray-auto": ["-c", "import ray; ray.init(address='auto'); ray.shutdown()"],
}
"""Variant -> the Python program whose time the command cannot go below."""
HEAD = [RAY, "start", "--head", "--num-cpus", "2", "--include-dashboard=false"]


def cached_bytecode_env(cache_dir: str) -> dict[str, str]:
    """The environment with bytecode caches on, kept in ``cache_dir``: an installed rlflow has
    its ``.pyc`` files, and without them (``PYTHONDONTWRITEBYTECODE``, a checkout never
    imported) every process, Ray's workers too, compiles rlflow's modules again (about 0.2 s
    each)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": cache_dir}


def start_head(temp_dir: str, base: dict[str, str]) -> dict[str, str]:
    """``ray start --head`` with its own ``temp_dir``; the environment that points at it."""
    argv = [*HEAD, "--port", "0", "--temp-dir", temp_dir]
    subprocess.run(argv, capture_output=True, check=True, env=base)
    address = Path(temp_dir, "ray_current_cluster").read_text().strip()
    # `ray start` turns token authentication on; ``auto`` turns it on in the driver by itself,
    # an address from RAY_ADDRESS does not.
    return {**base, "RAY_ADDRESS": address, "RAY_AUTH_MODE": "token"}


def become_subreaper() -> None:
    """Make this process the reaper of its orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``):
    a command's Ray processes and Ray workers that outlive their parents are waited for here, so
    their CPU seconds are counted."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def process_parents() -> dict[int, tuple[int, bytes]]:
    """Every process: pid -> (parent pid, command line)."""
    found: dict[int, tuple[int, bytes]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        found[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), args)
    return found


def head_pids(temp_dir: str) -> set[int]:
    """The processes of the Ray started with ``temp_dir`` (those naming it, and their
    children)."""
    processes = process_parents()
    mine = {p for p, (_, args) in processes.items() if temp_dir.encode() in args}
    mine.discard(os.getpid())
    grown = True
    while grown:
        children = {p for p, (ppid, _) in processes.items() if ppid in mine} - mine
        grown = bool(children)
        mine |= children
    return mine


def tree_cpu(pids: set[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` used, with their children they waited
    for (a raylet waits for its dead workers): for a running Ray, which this process cannot
    wait for."""
    ticks = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def stop_head(temp_dir: str) -> None:
    """Kill the processes of the Ray started with ``temp_dir`` (and their children) by id, and
    wait for those that are this process's children (it is their subreaper)."""
    mine = head_pids(temp_dir)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in mine:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        time.sleep(1.0)
    for pid in mine:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    shutil.rmtree(temp_dir, ignore_errors=True)


def reap_orphans(exclude: set[int], timeout_s: float = 5.0) -> None:
    """Wait (up to ``timeout_s``) for this process's children but ``exclude`` (a running Ray's):
    the orphaned processes of the command that just ended."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(-1, os.WNOHANG)[0] > 0:
                continue
        me = os.getpid()
        alive = {p for p, (ppid, _) in process_parents().items() if ppid == me} - exclude
        if not alive:
            return
        time.sleep(0.05)


def wall(
    argv: list[str], env: dict[str, str] | None = None, keep: set[int] | None = None
) -> tuple[float, float]:
    """Wall and CPU seconds of a fresh process running ``argv`` (its output discarded); inf on
    failure. CPU: user + system of the process and all its descendants (a Ray it started, that
    Ray's workers), plus what the running Ray of processes ``keep`` used meanwhile (its workers,
    reaped by its raylet; other users of that Ray would count too)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    running_before = tree_cpu(keep or set())
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False, env=env)
    seconds = time.perf_counter() - start
    reap_orphans(keep or set())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    running = tree_cpu(keep or set()) - running_before
    if done.returncode != 0:
        print(f"  failed ({done.returncode}): {' '.join(argv)}\n{done.stderr.decode()[-800:]}")
        return float("inf"), float("inf")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu + running


def breakdown(variant: str, out: str) -> dict[str, float]:
    """Phase seconds of one run of ``variant`` in this process (call in a fresh process)."""
    phases: dict[str, float] = {}
    mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[name] = phases.get(name, 0.0) + now - mark
        mark = now

    importlib.import_module("torch")
    lap("import torch")
    from rlflow import flow
    from rlflow import trainer as trainer_mod
    from rlflow.algorithms import tuned_config

    lap("import rlflow (after torch)")
    timed(trainer_mod, "resolve_setup", "resolve config + env names", phases)
    timed(trainer_mod, "_build_learner", "learner worker (env check)", phases)
    timed(trainer_mod, "acquire_backend", "backend start (ray.init)", phases)
    timed(flow, "placement_group", "placement group", phases)
    timed(trainer_mod, "_make_workers", "remote workers created", phases)
    timed(trainer_mod.Trainer, "_build_plan", "plan built", phases)
    timed(trainer_mod, "release_backend", "backend shutdown", phases)
    config = tuned_config("ppo", "CartPole-v1")
    address = "auto" if variant == "ray-auto" else None
    backend = "local" if variant == "local" else "ray"
    mark = time.perf_counter()
    trainer = trainer_mod.Trainer("ppo", backend=backend, address=address, config=config)
    lap("Trainer() other")
    trainer.workers.foreach_worker(lambda w: None)  # every remote worker ready
    lap("remote workers ready")
    trainer.train()
    lap("first train()")
    # torch.optim's optimizers import torch._dynamo (about as long as torch); rlflow's Adam
    # does not: 1.0 here would mean something in the run brought it back.
    dynamo = float("torch._dynamo" in sys.modules)
    trainer.save(os.path.join(out, "checkpoint"))
    lap("checkpoint")
    trainer.stop()
    lap("stop (workers + backend)")
    phases["stop workers"] = phases.pop("stop (workers + backend)") - phases["backend shutdown"]
    phases["backend shutdown"] = phases.pop("backend shutdown")
    inside = ["resolve config + env names", "learner worker (env check)"]
    inside += ["backend start (ray.init)", "remote workers created", "plan built"]
    phases["Trainer() other"] -= sum(phases.get(name, 0.0) for name in inside)
    phases["remote workers created"] -= phases.get("placement group", 0.0)
    phases["total"] = sum(phases.values())
    phases["torch._dynamo imported (0/1)"] = dynamo
    return phases


def timed(owner: Any, name: str, label: str, phases: dict[str, float]) -> None:
    """Wrap ``owner.name`` so that its seconds are recorded under ``label`` (from 0.0)."""
    phases.setdefault(label, 0.0)
    original: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            phases[label] += time.perf_counter() - start

    setattr(owner, name, wrapper)


def run_breakdown(
    variant: str, out: str, env: dict[str, str] | None, keep: set[int]
) -> dict[str, float]:
    """The phases of one run of ``variant``, in a fresh process; an empty dict on failure."""
    argv = [PY, __file__, "--child-breakdown", variant, "--child-out", out]
    done = subprocess.run(argv, capture_output=True, check=False, text=True, env=env)
    reap_orphans(keep)
    if done.returncode != 0:
        print(f"  breakdown {variant} failed ({done.returncode}):\n{done.stderr[-800:]}")
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run_round(
    variants: list[str], tmp: str, r: int, base: dict[str, str]
) -> tuple[dict[str, float], dict[str, Any]]:
    """One paired round: every variant's command, floor and breakdown (in environment
    ``base``); seconds by name."""
    times: dict[str, float] = {}
    phases: dict[str, Any] = {}
    for v in variants:
        head = f"/tmp/rlstart{os.getpid()}" if v == "ray-auto" else None
        try:
            env = start_head(head, base) if head else base
            keep = head_pids(head) if head else set()
            out = os.path.join(tmp, f"{v}{r}")
            command = wall([RLFLOW, *COMMAND, *VARIANTS[v], "--out", out], env, keep)
            floor = wall([PY, *FLOORS[v]], env, keep)
            times[f"command {v}"], times[f"command cpu {v}"] = command
            times[f"floor {v}"], times[f"floor cpu {v}"] = floor
            phases[v] = run_breakdown(v, os.path.join(tmp, f"{v}{r}b"), env, keep)
        finally:
            if head:
                stop_head(head)
    return times, phases


def report(
    variants: list[str], times: list[dict[str, float]], phases: list[dict[str, Any]]
) -> None:
    """Print the medians over rounds."""
    print("\nmedians over rounds (seconds)")
    for v in variants:
        command = statistics.median(t[f"command {v}"] for t in times)
        floor = statistics.median(t[f"floor {v}"] for t in times)
        print(f"{v:>8}: command {command:6.2f} | floor {floor:5.2f} | added {command - floor:5.2f}")
        cpu = statistics.median(t[f"command cpu {v}"] for t in times)
        floor_cpu = statistics.median(t[f"floor cpu {v}"] for t in times)
        print(
            f"{'':>8}  cpu s:  {cpu:6.2f} |        {floor_cpu:5.2f} |       {cpu - floor_cpu:5.2f}"
        )
        runs = [p[v] for p in phases if p.get(v)]
        for name in runs[0] if runs else ():
            value = statistics.median(p[name] for p in runs)
            print(f"           {name:<40} {value:6.2f}")


def main() -> None:
    """Parse the flags and run the rounds (or, as a child, one breakdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="local,ray,ray-auto")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="run every process with PYTHONDONTWRITEBYTECODE=1 (each compiles rlflow again)",
    )
    parser.add_argument("--child-breakdown", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_breakdown:
        print(json.dumps(breakdown(args.child_breakdown, args.child_out)))
        return
    variants = args.variants.split(",")
    become_subreaper()
    times, phases = [], []
    with tempfile.TemporaryDirectory() as tmp:
        base = cached_bytecode_env(os.path.join(tmp, "pycache"))
        if args.no_bytecode_cache:
            base = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        print("warm-up round (not counted: writes the bytecode caches)", flush=True)
        run_round(variants, tmp, -1, base)
        for r in range(args.rounds):
            print(f"round {r + 1}: load average {os.getloadavg()}", flush=True)
            round_times, round_phases = run_round(variants, tmp, r, base)
            print("  " + ", ".join(f"{k} {v:.2f}" for k, v in round_times.items()), flush=True)
            times.append(round_times)
            phases.append(round_phases)
    report(variants, times, phases)
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()

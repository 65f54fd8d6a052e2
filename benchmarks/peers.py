"""rlflow beside its peers on one machine: env steps/s of APPO and IMPALA against Sample Factory 2
and RLlib 2.60, and PPO CartPole-v1's time to 475 against Stable-Baselines3, in one table.

Throughput (``--envs``, ``--peers``): each peer runs as a subprocess with the same
``--workers`` rollout processes of ``--envs-per-worker`` envs each (`peer_drivers/`):

- ``rlflow-appo``, ``rlflow-impala``: rlflow's tuned config of the algorithm for the env
  (``impala_throughput.actor_learner_rates``: Ray with ``--workers`` CPUs, the learner thread in
  the driver), in this interpreter's environment;
- ``sf-appo``: Sample Factory 2.1.1's APPO (asynchronous: ``--async_rl=True``) with its own
  defaults for the env family (its ``sf_examples.atari`` ones for Atari), in its own venv;
- ``rllib-appo``, ``rllib-impala``: RLlib 2.60's APPO and IMPALA on the new API stack with their
  defaults, the learner in the algorithm's process (``num_learners=0``; Ray gets one more CPU
  for that process), in its own venv.

Learning settings stay each library's own (rlflow's tuned file, the peers' defaults); only the
rollout processes and envs are set the same. A peer runs for ``--warmup`` + ``--seconds`` after
its first progress report; the rates are taken from the first report after the warm-up to the
last one, two ways: the library's own counters (its JSON lines; Sample Factory's "Samples" and
"Total num frames" log line) and independently, by `peer_count.StepCounter` around every env the
peer builds (files summed over the same window). Atari ids are played with each library's
DeepMind preprocessing, 4 frames per env step; rates are env steps (frames / 4).
``--rounds`` runs the list again, interleaved (round 1: every env and peer; round 2: ...), and the
table gives medians. Ratios: rlflow's algorithm / the peer's (APPO for Sample Factory), sampled
env steps/s by the independent count.

PPO (``--ppo``): ``ppo_cartpole.py`` run once per (seed, runner) in a process of its own for
``sb3``, ``local`` and ``ray``: the whole process's wall time (imports, Ray, shutdown) and its
training seconds to a 100-episode mean of 475, env steps, medians over ``--ppo-seeds``, ratios
to SB3.

The peers' venvs are made under ``--cache`` (default ``.peers/`` in the repository, ignored by
git) on first use with pip from PyPI and kept; a venv whose stamp lists the same requirements is
reused as it is (``--setup-only`` makes them and stops). Rows are appended as JSON lines to
``--out`` (default ``benchmarks/results/peers/<UTC time>.jsonl``). Run::

    python benchmarks/peers.py [--envs CartPole-v1,ALE/Pong-v5] [--peers all | a,b]
        [--workers 2] [--envs-per-worker 8] [--warmup 10] [--seconds 30] [--rounds 1]
        [--ppo] [--ppo-seeds 0,1,2] [--no-throughput] [--gpu] [--setup-only]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from peer_count import COUNT_DIR_VAR, counted_rate, read_counts

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DRIVERS = HERE / "peer_drivers"


@dataclass(frozen=True)
class Venv:
    """A peer's Python environment: ``name`` under the cache, made with ``requirements``;
    ``name`` "" is this interpreter's own (rlflow's, the ``bench`` extra for SB3)."""

    name: str
    requirements: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    """Distributions whose versions are recorded."""


OWN = Venv("", packages=("rl-flow", "torch", "ray", "gymnasium", "ale-py", "stable-baselines3"))
SAMPLE_FACTORY = Venv(
    "sample-factory",
    ("sample-factory==2.1.1", "torch==2.13.0", "numpy<2", "gymnasium<1", "ale-py<0.10"),
    ("sample-factory", "torch", "numpy", "gymnasium", "ale-py"),
)
RLLIB = Venv(
    "rllib",
    (
        "ray[rllib]==2.60.0",
        "torch==2.13.0",
        "gymnasium[atari]",
        "lz4",
        "opencv-python-headless",
    ),
    ("ray", "torch", "numpy", "gymnasium", "ale-py"),
)


@dataclass(frozen=True)
class Peer:
    """One library's algorithm: its venv, driver script and the ratio's rlflow row."""

    name: str
    venv: Venv
    driver: str
    algo: str
    rlflow_row: str
    """The rlflow peer this one is compared with."""


PEERS = {
    p.name: p
    for p in (
        Peer("rlflow-appo", OWN, "rlflow_driver.py", "appo", "rlflow-appo"),
        Peer("rlflow-impala", OWN, "rlflow_driver.py", "impala", "rlflow-impala"),
        Peer("sf-appo", SAMPLE_FACTORY, "sf_driver.py", "appo", "rlflow-appo"),
        Peer("rllib-appo", RLLIB, "rllib_driver.py", "appo", "rlflow-appo"),
        Peer("rllib-impala", RLLIB, "rllib_driver.py", "impala", "rlflow-impala"),
    )
}


# ---------------------------------------------------------------------------------------------
# venvs


def venv_python(venv: Venv, cache: Path) -> Path:
    """The interpreter of ``venv``."""
    return Path(sys.executable) if not venv.name else cache / venv.name / "bin" / "python"


def ensure_venv(venv: Venv, cache: Path) -> dict[str, Any]:
    """Make ``venv`` under ``cache`` unless its stamp lists the same requirements; returns the
    stamp (requirements, seconds the setup took, package versions)."""
    if not venv.name:
        return {"requirements": [], "setup_s": 0.0, "versions": versions(venv, cache)}
    folder = cache / venv.name
    stamp_path = folder / "peers-stamp.json"
    if stamp_path.exists():
        stamp = json.loads(stamp_path.read_text())
        if stamp.get("requirements") == list(venv.requirements):
            return stamp
    print(f"setting up {folder} ({' '.join(venv.requirements)}) ...", flush=True)
    start = time.perf_counter()
    if not venv_python(venv, cache).exists():
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(venv_python(venv, cache)), "-m", "pip", "install", "-q", *venv.requirements]
    subprocess.run(pip, check=True)
    stamp = {
        "requirements": list(venv.requirements),
        "setup_s": round(time.perf_counter() - start, 1),
        "versions": versions(venv, cache),
    }
    stamp_path.write_text(json.dumps(stamp, indent=1))
    print(f"  done in {stamp['setup_s']} s: {stamp['versions']}", flush=True)
    return stamp


def versions(venv: Venv, cache: Path) -> dict[str, str]:
    """The installed versions of ``venv.packages`` (absent ones left out)."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for p in sys.argv[1:]:\n"
        "    try: out[p] = m.version(p)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    cmd = [str(venv_python(venv, cache)), "-c", code, *venv.packages]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# parsing


class Report(NamedTuple):
    """One progress report of a peer: when it arrived (unix time) and the library's own
    cumulative counters (env steps; ``trained`` None when the library gave none)."""

    t: float
    sampled: float
    trained: float | None


SF_LINE = re.compile(r"Total num frames: (\d+)\..*?Samples: (\d+)\.")


def parse_line(line: str, *, frame_skip: int) -> tuple[float, float | None] | None:
    """(sampled, trained) env steps from one line of a peer's output, or None for other lines.

    Drivers print ``{"report": {"sampled": N, "trained": M}}``; Sample Factory logs "Total num
    frames: F. ... Samples: S." every 5 s, F being the learner's env steps times the frame skip
    (trained) and S the steps its inference workers served (sampled).

    >>> parse_line('{"report": {"sampled": 800.0, "trained": null}}', frame_skip=1)
    (800.0, None)
    >>> parse_line("[..] Fps is (10 sec: 1.0). Total num frames: 4096. Throughput: 0: 9.5. "
    ...            "Samples: 1100. Policy #0 lag: (min: 0.0)", frame_skip=4)
    (1100.0, 1024.0)
    """
    if line.startswith('{"report"'):
        counts = json.loads(line)["report"]
        trained = counts.get("trained")
        return float(counts["sampled"] or 0), None if trained is None else float(trained)
    match = SF_LINE.search(line)
    if match:
        return float(match.group(2)), int(match.group(1)) / frame_skip
    return None


class Window(NamedTuple):
    """The measured window of one run: its bounds (unix times) and the library's own rates."""

    start: float
    end: float
    sampled: float
    trained: float | None


def window(reports: list[Report], warmup: float) -> Window | None:
    """From the first report at least ``warmup`` s after the first one to the last report;
    None with fewer than two reports in it."""
    if not reports:
        return None
    after = [r for r in reports if r.t >= reports[0].t + warmup]
    if len(after) < 2 or after[-1].t <= after[0].t:
        return None
    a, b = after[0], after[-1]
    span = b.t - a.t
    trained = None
    if a.trained is not None and b.trained is not None:
        trained = (b.trained - a.trained) / span
    return Window(a.t, b.t, (b.sampled - a.sampled) / span, trained)


# ---------------------------------------------------------------------------------------------
# runs


@dataclass
class Run:
    """One peer's run on one env: what it reported, what the counters saw."""

    peer: str
    env: str
    round: int
    workers: int
    envs_per_worker: int
    seconds: float
    sampled: float = math.nan
    """Env steps/s sampled by the library's own counter."""
    counted: float = math.nan
    """Env steps/s counted by `peer_count.StepCounter` over the same window."""
    trained: float = math.nan
    """Env steps/s trained by the library's own counter (nan where it gives none)."""
    reports: int = 0
    window_s: float = 0.0
    count_files: int = 0
    load_before: float = 0.0
    load_after: float = 0.0
    wall_s: float = 0.0
    error: str = ""
    tail: list[str] = field(default_factory=list)


def frame_skip(env: str) -> int:
    """Frames per env step: 4 for Atari ids (every library's DeepMind preprocessing), else 1."""
    return 4 if env.startswith("ALE/") else 1


def child_env(count_dir: str) -> dict[str, str]:
    """The environment of a peer's process: unbuffered, the count folder, this repo's
    ``src`` and ``benchmarks`` on the path."""
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env["PYTHONUNBUFFERED"] = "1"
    env[COUNT_DIR_VAR] = count_dir
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(HERE)])
    env.setdefault("RAY_DEDUP_LOGS", "0")
    return env


def run_peer(peer: Peer, env_id: str, args: argparse.Namespace, cache: Path, round_: int) -> Run:
    """Run ``peer`` on ``env_id`` for ``args.warmup + args.seconds`` after its first report."""
    run = Run(peer.name, env_id, round_, args.workers, args.envs_per_worker, args.seconds)
    run.load_before = round(os.getloadavg()[0], 2)
    cmd = [str(venv_python(peer.venv, cache)), str(DRIVERS / peer.driver)]
    cmd += ["--env", env_id, "--workers", str(args.workers), "--envs", str(args.envs_per_worker)]
    cmd += ["--run-s", str(args.warmup + args.seconds)]
    cmd += ["--algo", peer.algo] if peer.driver != "sf_driver.py" else []
    cmd += ["--gpu"] if args.gpu else []
    reports: list[Report] = []
    lines: list[str] = []
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="peers_count_") as count_dir:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=child_env(count_dir),
            start_new_session=True,
            cwd=tempfile.gettempdir(),
        )
        deadline = start + args.warmup + args.seconds + args.startup_timeout
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                now = time.time()
                lines = [*lines[-39:], line.rstrip()]
                parsed = parse_line(line.strip(), frame_skip=frame_skip(env_id))
                if parsed is not None and (parsed[0] > 0 or reports):
                    reports.append(Report(now, *parsed))
                if now > deadline:
                    run.error = f"stopped after {now - start:.0f} s"
                    break
        finally:
            stop(proc)
        run.wall_s = round(time.time() - start, 1)
        measured = window(reports, args.warmup)
        series = read_counts(count_dir)
    run.reports, run.count_files, run.tail = len(reports), len(series), lines[-12:]
    run.load_after = round(os.getloadavg()[0], 2)
    if proc.returncode not in (0, None) and not run.error:
        run.error = f"exit code {proc.returncode}"
    if measured is None:
        run.error = run.error or f"fewer than 2 reports after the warm-up ({len(reports)} in all)"
        return run
    run.window_s = round(measured.end - measured.start, 1)
    run.sampled = measured.sampled
    run.trained = math.nan if measured.trained is None else measured.trained
    if series:
        run.counted = counted_rate(series, measured.start, measured.end)
    return run


def stop(proc: subprocess.Popen[str]) -> None:
    """Wait for ``proc`` to end by itself (it stops after its time), else end its process
    group: SIGTERM, then SIGKILL."""
    try:
        proc.wait(timeout=60)
        return
    except subprocess.TimeoutExpired:
        pass
    for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait_s)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


# ---------------------------------------------------------------------------------------------
# PPO against SB3


class PPORun(NamedTuple):
    """One ``ppo_cartpole.py`` process: its outcome line and the process's wall time."""

    runner: str
    seed: int
    reached: bool
    steps: int
    train_s: float
    process_s: float
    error: str


def run_ppo(runner: str, seed: int) -> PPORun:
    """``ppo_cartpole.py --only RUNNER --seeds SEED`` in a process of its own, timed whole."""
    with tempfile.TemporaryDirectory(prefix="peers_ppo_") as tmp:
        out = Path(tmp) / "outcome.jsonl"
        cmd = [sys.executable, str(HERE / "ppo_cartpole.py"), "--only", runner]
        cmd += ["--seeds", str(seed), "--json", str(out)]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(tmp), check=False)
        process_s = time.perf_counter() - start
        if not out.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            return PPORun(runner, seed, False, 0, math.nan, process_s, " | ".join(tail))
        o = json.loads(out.read_text().splitlines()[-1])
    return PPORun(runner, seed, o["reached"], o["steps"], o["seconds"], process_s, o["error"])


def ppo_medians(runs: list[PPORun]) -> dict[str, dict[str, float]]:
    """Per runner: median env steps, training seconds and process seconds, a run that missed
    the target counting as infinite.

    >>> r = [PPORun("sb3", 0, True, 60, 10.0, 14.0, ""), PPORun("sb3", 1, False, 99, 9.0, 9.0, "")]
    >>> ppo_medians(r)["sb3"]["process_s"]
    inf
    """
    out: dict[str, dict[str, float]] = {}
    for runner in dict.fromkeys(r.runner for r in runs):
        mine = [r for r in runs if r.runner == runner]
        out[runner] = {
            key: statistics.median(getattr(r, key) if r.reached else math.inf for r in mine)
            for key in ("steps", "train_s", "process_s")
        }
        out[runner]["reached"] = sum(r.reached for r in mine)
        out[runner]["runs"] = len(mine)
    return out


# ---------------------------------------------------------------------------------------------
# the table


def median_of(values: list[float]) -> float:
    """Median of the finite ``values``; nan if none."""
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def best_rate(run_values: dict[str, float]) -> float:
    """The independent count where there is one, else the library's own sampled rate."""
    return run_values["counted"] if not math.isnan(run_values["counted"]) else run_values["sampled"]


def summarize(runs: list[Run]) -> list[dict[str, Any]]:
    """One row per (env, peer): medians over rounds and the ratio rlflow / peer of sampled
    env steps/s (independent count where there is one)."""
    rows: list[dict[str, Any]] = []
    keys = list(dict.fromkeys((r.env, r.peer) for r in runs))
    medians = {
        key: {
            f: median_of([getattr(r, f) for r in runs if (r.env, r.peer) == key])
            for f in ("sampled", "counted", "trained")
        }
        for key in keys
    }
    for env, peer in keys:
        m = medians[(env, peer)]
        ref = medians.get((env, PEERS[peer].rlflow_row))
        ratio = math.nan
        if ref is not None and peer != PEERS[peer].rlflow_row:
            ratio = best_rate(ref) / best_rate(m)
        rounds = [r for r in runs if (r.env, r.peer) == (env, peer)]
        rows.append(
            {
                "env": env,
                "peer": peer,
                **m,
                "ratio": ratio,
                "vs": PEERS[peer].rlflow_row,
                "rounds": len(rounds),
                "failed": sum(bool(r.error) and math.isnan(r.sampled) for r in rounds),
            }
        )
    return rows


def fmt(value: float, spec: str = ",.0f") -> str:
    """``value`` formatted, "-" for nan or infinity."""
    return "-" if value is None or math.isnan(value) or math.isinf(value) else format(value, spec)


def throughput_table(rows: list[dict[str, Any]]) -> str:
    """The throughput rows as a Markdown table."""
    out = [
        "| env | peer | sampled/s (own) | sampled/s (counted) | trained/s (own) | rlflow / peer |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = f"{fmt(r['ratio'], '.2f')}x ({r['vs']})" if not math.isnan(r["ratio"]) else "-"
        failed = f" ({r['failed']} of {r['rounds']} failed)" if r["failed"] else ""
        out.append(
            f"| {r['env']} | {r['peer']}{failed} | {fmt(r['sampled'])} | {fmt(r['counted'])} "
            f"| {fmt(r['trained'])} | {ratio} |"
        )
    return "\n".join(out)


def ppo_table(medians: dict[str, dict[str, float]]) -> str:
    """The PPO medians as a Markdown table with the ratios to SB3."""
    out = [
        "| PPO CartPole-v1 to 475 | reached | env steps | train s | process s | process / SB3 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    sb3 = medians.get("sb3", {}).get("process_s", math.nan)
    for runner, m in medians.items():
        ratio = m["process_s"] / sb3 if runner != "sb3" else math.nan
        out.append(
            f"| {runner} | {int(m['reached'])}/{int(m['runs'])} | {fmt(m['steps'])} "
            f"| {fmt(m['train_s'], '.1f')} | {fmt(m['process_s'], '.1f')} | {fmt(ratio, '.2f')} |"
        )
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="CartPole-v1,ALE/Pong-v5")
    parser.add_argument("--peers", default="all", help="all, or some of " + ",".join(PEERS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs-per-worker", type=int, default=8)
    parser.add_argument("--warmup", type=float, default=10.0, help="s after the first report")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured s after warm-up")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    parser.add_argument("--ppo", action="store_true", help="also PPO CartPole against SB3")
    parser.add_argument("--ppo-seeds", default="0,1,2")
    parser.add_argument("--ppo-runners", default="sb3,local,ray")
    parser.add_argument("--no-throughput", action="store_true")
    parser.add_argument("--gpu", action="store_true", help="learners (and SF) on the GPU")
    parser.add_argument("--cache", default=str(ROOT / ".peers"), help="where the venvs live")
    parser.add_argument("--setup-only", action="store_true")
    parser.add_argument("--out", default=None, help="JSON lines file")
    args = parser.parse_args(argv)
    names = list(PEERS) if args.peers == "all" else args.peers.split(",")
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        parser.error(f"--peers: unknown {unknown}; choose from {', '.join(PEERS)}")
    args.peer_list = [PEERS[n] for n in names]
    return args


def run_throughput(
    args: argparse.Namespace, cache: Path, write: Callable[[dict[str, Any]], None]
) -> list[Run]:
    """Every peer on every env, round by round (interleaved), each run printed and written."""
    runs: list[Run] = []
    envs = [] if args.no_throughput else args.envs.split(",")
    for round_ in range(1, args.rounds + 1 if envs else 1):
        for env_id in envs:
            for peer in args.peer_list:
                run = run_peer(peer, env_id, args, cache, round_)
                runs.append(run)
                write({"kind": "run", **asdict(run)})
                print(
                    f"round {round_} {env_id} {peer.name}: sampled {fmt(run.sampled)}/s, "
                    f"counted {fmt(run.counted)}/s, trained {fmt(run.trained)}/s over "
                    f"{run.window_s} s ({run.reports} reports, {run.count_files} envs counted; "
                    f"load {run.load_before} -> {run.load_after}) {run.error}",
                    flush=True,
                )
                if run.error and math.isnan(run.sampled):
                    print("  " + "\n  ".join(run.tail))
    return runs


def run_ppo_rows(args: argparse.Namespace, write: Callable[[dict[str, Any]], None]) -> list[PPORun]:
    """With ``--ppo``: every seed, then every runner in it, each run printed and written."""
    ppo: list[PPORun] = []
    if not args.ppo:
        return ppo
    for seed in (int(s) for s in args.ppo_seeds.split(",")):
        for runner in args.ppo_runners.split(","):
            ppo.append(run_ppo(runner, seed))
            write({"kind": "ppo", **ppo[-1]._asdict(), "load": os.getloadavg()[0]})
            print(f"ppo {ppo[-1]}", flush=True)
    return ppo


def main(argv: list[str] | None = None) -> None:
    """Set up the venvs, run the peers round by round, print and write the tables."""
    args = parse_args(argv)
    cache = Path(args.cache)
    stamp = time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime())
    out = Path(args.out) if args.out else HERE / "results" / "peers" / f"{stamp}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)

    def write(row: dict[str, Any]) -> None:
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")

    venvs = list(dict.fromkeys(p.venv for p in args.peer_list))
    setups = {v.name or "rlflow": ensure_venv(v, cache) for v in venvs}
    write({"kind": "setup", "time": stamp, "cpus": os.cpu_count(), "venvs": setups})
    for name, s in setups.items():
        print(f"{name}: {s['versions']} (first setup {s['setup_s']} s)")
    if args.setup_only:
        return
    runs = run_throughput(args, cache, write)
    ppo = run_ppo_rows(args, write)
    print(
        f"\n{args.workers} workers x {args.envs_per_worker} envs, {args.warmup} s warm-up, "
        f"{args.seconds} s measured, {args.rounds} round(s); env steps (Atari: frames / 4)"
    )
    if runs:
        rows = summarize(runs)
        for row in rows:
            write({"kind": "summary", **row})
        print(throughput_table(rows))
    if ppo:
        medians = ppo_medians(ppo)
        write({"kind": "ppo_summary", "medians": medians})
        print(ppo_table(medians))
    print(f"rows in {out}; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

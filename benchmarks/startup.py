"""Start-up: the whole ``rlflow train ppo --env CartPole-v1 --stop-iters 1`` command, and where
its time goes.

Two measurements, medians of ``--rounds`` paired rounds (each round runs every variant once, in
turn), with the load average printed per round:

- **command**: wall seconds of the CLI as a user runs it (a fresh process; ``--backend local``
  and ``--backend ray``), beside the floor of any torch program: ``python -c "import torch"``
  (and, for Ray, that plus ``ray.init()`` / ``ray.shutdown()`` of a 2-CPU session). The ratio
  is command / floor.
- **breakdown** (a fresh process per backend, ``--breakdown``): the same run driven from Python
  with each start-up phase timed: importing rlflow, resolving the config (``resolve_setup``:
  the typed config and the env names), building the learner's worker on the driver (one probe
  env and the policy: the env check), starting the backend, the remote workers (started, then
  ready: their first ``ping``), building the plan, the first
  ``train()`` (and whether ``torch._dynamo`` got imported: it costs about as long as torch, and
  rlflow's Adam avoids it), and stopping.

    python benchmarks/startup.py [--rounds 3] [--backends local,ray]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PY = sys.executable
RLFLOW = str(Path(PY).with_name("rlflow"))
COMMAND = ["train", "ppo", "--env", "CartPole-v1", "--stop-iters", "1"]
FLOORS = {
    "local": ["-c", "import torch"],
    "ray": [
        "-c",
        "import torch, ray; ray.init(num_cpus=2, include_dashboard=False); ray.shutdown()",
    ],
}


def wall(argv: list[str]) -> float:
    """Seconds a fresh process running ``argv`` takes (its output discarded); inf on failure."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        print(f"  failed ({done.returncode}): {' '.join(argv)}\n{done.stderr.decode()[-800:]}")
        return float("inf")
    return seconds


def breakdown(backend: str) -> dict[str, float]:
    """Phase seconds of one run in this process (call in a fresh process)."""
    phases: dict[str, float] = {}
    mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[name] = now - mark
        mark = now

    importlib.import_module("torch")
    lap("import torch")
    from rlflow import trainer as trainer_mod
    from rlflow.algorithms import tuned_config

    lap("import rlflow (after torch)")
    timed(trainer_mod, "resolve_setup", "resolve config + env names", phases)
    timed(trainer_mod, "_build_learner", "learner worker (env check)", phases)
    timed(trainer_mod, "acquire_backend", "backend start", phases)
    timed(trainer_mod, "_make_workers", "remote workers started", phases)
    mark = time.perf_counter()
    config = tuned_config("ppo", "CartPole-v1")
    trainer = trainer_mod.Trainer("ppo", backend=backend, config=config)
    lap("Trainer() total")
    trainer.workers.foreach_worker(lambda w: None)  # every remote worker ready
    lap("remote workers ready")
    trainer.train()
    lap("first train()")
    # torch.optim's optimizers import torch._dynamo (about as long as torch); rlflow's Adam
    # does not: 1.0 here would mean something in the run brought it back.
    phases["torch._dynamo imported (0/1)"] = float("torch._dynamo" in sys.modules)
    trainer.stop()
    lap("stop")
    return phases


def timed(module: Any, name: str, label: str, phases: dict[str, float]) -> None:
    """Wrap ``module.name`` so that its seconds are recorded under ``label``."""
    original: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            phases[label] = phases.get(label, 0.0) + time.perf_counter() - start

    setattr(module, name, wrapper)


def run_breakdown(backend: str) -> dict[str, float]:
    argv = [PY, __file__, "--child-breakdown", backend]
    done = subprocess.run(argv, capture_output=True, check=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="local,ray")
    parser.add_argument("--child-breakdown", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_breakdown:
        print(json.dumps(breakdown(args.child_breakdown)))
        return
    backends = args.backends.split(",")
    times: dict[str, list[float]] = {}
    phases: dict[str, list[dict[str, float]]] = {b: [] for b in backends}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            print(f"round {r + 1}: load average {os.getloadavg()}")
            for b in backends:
                out = os.path.join(tmp, f"{b}{r}")
                command = [RLFLOW, *COMMAND, "--backend", b, "--out", out]
                times.setdefault(f"command {b}", []).append(wall(command))
                times.setdefault(f"floor {b}", []).append(wall([PY, *FLOORS[b]]))
                phases[b].append(run_breakdown(b))
    print("\nmedians over rounds (seconds)")
    for b in backends:
        command = statistics.median(times[f"command {b}"])
        floor = statistics.median(times[f"floor {b}"])
        ratio = command / floor
        print(f"{b:>5}: command {command:6.2f} | floor {floor:5.2f} | command/floor {ratio:4.2f}")
        for name in phases[b][0]:
            value = statistics.median(p[name] for p in phases[b])
            print(f"         {name:<40} {value:6.2f}")
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()

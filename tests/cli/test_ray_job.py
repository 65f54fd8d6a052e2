"""``ray job submit -- rlflow train ...`` against a Ray head started with ``ray start``: the
job's entrypoint connects to the head (``--address auto`` finds the job's ``RAY_ADDRESS``) and an
elastic run (``min_workers``) starts with the workers the head holds. The head runs with
``--block`` on ports of its own and a temp dir of its own, so stopping it (SIGTERM) stops only
it: ``ray stop`` would stop every Ray of the machine."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(900)]

SRC = Path(__file__).resolve().parents[2] / "src"
BIN = Path(sys.executable).parent
HEAD_START_S = 180.0
"""How long ``ray start --head`` and its job server may take on a loaded CI machine (30 to 70 s
here)."""
START_TRIES = 3
"""Heads started before the test gives up (see `ray_head`)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def job_server_answers(address: str, env: dict[str, str]) -> bool:
    """Whether the head's job server at ``address`` lists its jobs."""
    listing = [str(BIN / "ray"), "job", "list", "--address", address]
    try:
        return subprocess.run(listing, env=env, capture_output=True, timeout=60).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def stop(head: subprocess.Popen[bytes]) -> None:
    """SIGTERM to ``ray start --block``: it stops the head's processes, then exits."""
    head.send_signal(signal.SIGTERM)
    try:
        head.wait(timeout=90)
    except subprocess.TimeoutExpired:
        head.kill()
        head.wait()


@contextlib.contextmanager
def ray_head(env: dict[str, str], log: Path) -> Iterator[str]:
    """A Ray head (2 CPUs, its dashboard) started with ``ray start --head --block``; the address
    of its job server. Ray gives a raylet 30 s to register, which a machine under heavy load
    can miss: a head that fails to start is started again (``START_TRIES`` in all)."""
    for attempt in range(1, START_TRIES + 1):
        dashboard = free_port()
        temp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # Ray's socket paths must stay short
        command = [
            str(BIN / "ray"), "start", "--head", "--block", "--num-cpus", "2", "--port", "0",
            "--ray-client-server-port", str(free_port()), "--dashboard-port", str(dashboard),
            "--dashboard-agent-listen-port", str(free_port()), "--include-dashboard", "true",
            "--temp-dir", temp, "--disable-usage-stats",
        ]  # fmt: skip
        with log.open("w") as out:
            head = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        address = f"http://127.0.0.1:{dashboard}"
        try:
            # Up when it says so and its job server answers (the dashboard may come later).
            deadline = time.monotonic() + HEAD_START_S
            while "Ray runtime started" not in log.read_text() or not job_server_answers(
                address, env
            ):
                if head.poll() is not None and attempt < START_TRIES:
                    break  # failed to start: try again
                assert head.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(1.0)
            else:
                yield address
                return
        finally:
            stop(head)
            shutil.rmtree(temp, ignore_errors=True)


def test_ray_job_submit_runs_an_elastic_rlflow_train_on_a_running_head(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
        "RAY_AUTH_MODE": "token",  # ray start turns token authentication on
        # Ray gives its dashboard 60 s to come up, which a loaded machine can take.
        "RAY_DASHBOARD_STARTUP_TIMEOUT_S": str(int(HEAD_START_S)),
    }
    env.pop("RAY_ADDRESS", None)
    with ray_head(env, tmp_path / "head.log") as address:
        run = tmp_path / "run"
        job = subprocess.run(
            [
                str(BIN / "ray"), "job", "submit", "--address", address,
                "--", "rlflow", "train", "ppo", "--env", "CartPole-v1", "--num-workers", "3",
                "--set", "min_workers=1", "--stop-iters", "1", "--address", "auto",
                "--logger", "jsonl", "--out", str(run),
            ],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    output = job.stdout + job.stderr
    assert job.returncode == 0, output[-3000:]
    assert "succeeded" in output, output[-3000:]
    # The head's 2 CPUs hold 2 of the 3 workers: the run started with them.
    assert "started 2 of num_workers=3 remote workers" in output, output[-3000:]
    [result] = [json.loads(line) for line in (run / "progress.jsonl").read_text().splitlines()]
    assert (result["num_healthy_workers"], result["num_target_workers"]) == (2, 3)

"""``ray job submit -- rlflow train ...`` against a Ray head started with ``ray start``: the
job's entrypoint connects to the head (``--address auto`` finds the job's ``RAY_ADDRESS``) and an
elastic run (``min_workers``) starts with the workers the head holds. The head runs with
``--block`` on ports of its own and a temp dir of its own, so stopping it (SIGTERM) stops only
it: ``ray stop`` would stop every Ray of the machine."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(420)]

SRC = Path(__file__).resolve().parents[2] / "src"
BIN = Path(sys.executable).parent
HEAD_START_S = 180.0
"""How long ``ray start --head`` and its job server may take on a loaded CI machine (30 to 70 s
here)."""


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
    dashboard = free_port()
    temp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # Ray's socket paths must stay short
    log = tmp_path / "head.log"
    command = [
        str(BIN / "ray"), "start", "--head", "--block", "--num-cpus", "2", "--port", "0",
        "--ray-client-server-port", str(free_port()), "--dashboard-port", str(dashboard),
        "--dashboard-agent-listen-port", str(free_port()), "--include-dashboard", "true",
        "--temp-dir", temp, "--disable-usage-stats",
    ]  # fmt: skip
    with log.open("w") as out:
        head = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        # Up when its job server answers (the dashboard may come up after the rest of the head).
        address = f"http://127.0.0.1:{dashboard}"
        deadline = time.monotonic() + HEAD_START_S
        while not job_server_answers(address, env):
            assert head.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1.0)
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
    finally:
        head.send_signal(signal.SIGTERM)  # --block stops the head's processes, then exits
        try:
            head.wait(timeout=90)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)

"""``rlflow train`` stopped by SIGTERM, as a cluster scheduler stops a job: a final checkpoint,
exit status 143, and nothing the command started left running.

The command runs in a subprocess; its first progress line is the signal that training is under
way (no sleeps), then it gets SIGTERM.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlflow import flow
from rlflow.checkpoint import load_checkpoint
from rlflow.cli import EXIT_TERMINATED, main
from rlflow.cli.commands import StopSignals, Terminated, terminated_by_sigterm
from rlflow.flow.backend.reaper import command_line, descendants, session_processes

pytestmark = pytest.mark.timeout(120)

TINY = [
    "--num-workers", "1", "--no-tuned", "--set", "sgd_minibatch_size=16",
    "--set", "rollout_fragment_length=16", "--set", "train_batch_size=32",
]  # fmt: skip
STOP_BUDGET_S = 60.0
"""How long the stop (checkpoint, actors, Ray) may take on a loaded CI machine."""


@pytest.fixture
def default_handlers() -> Iterator[None]:
    """SIGTERM and SIGINT handled as a fresh ``python`` handles them (whatever an earlier test
    left: Ray Tune's SIGINT handler, ray.init's SIGTERM one); this process's handlers are put
    back after the test."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _train(*argv: str, own_group: bool = False) -> subprocess.Popen[str]:
    """``python -m rlflow train ...`` with stdout and stderr merged into one text pipe (in a
    process group of its own with ``own_group``, as a job under a scheduler)."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # a Ray of its own
    return subprocess.Popen(
        [sys.executable, "-m", "rlflow", "train", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=own_group,
    )


def _wait_for_progress(proc: subprocess.Popen[str]) -> str:
    """Read ``proc``'s output up to its first progress line; the lines read."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("iter "):
            return "".join(lines)
    pytest.fail(f"exited ({proc.wait()}) before its first iteration:\n{''.join(lines)}")


def _terminate(proc: subprocess.Popen[str]) -> str:
    """Send SIGTERM to ``proc``; all it writes until it exits within `STOP_BUDGET_S`."""
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=STOP_BUDGET_S)
    return out


def _check_stopped_with_a_checkpoint(code: int, out: str) -> None:
    assert code == EXIT_TERMINATED, out
    assert "terminated (SIGTERM): saving a checkpoint" in out
    assert "*** SIG" not in out and "Traceback" not in out, out  # no crash dump
    done = re.search(r"done \(terminated\): (\d+) iterations", out)
    checkpoint = re.search(r"^checkpoint: (.+)$", out, re.MULTILINE)
    assert done is not None and checkpoint is not None, out
    state = load_checkpoint(checkpoint.group(1))
    assert state["algorithm"] == "ppo" and state["iteration"] == int(done.group(1)) >= 1


def _descendants(pid: int) -> dict[int, str]:
    """The processes below ``pid`` now: pid -> command line."""
    return {p: c for p in descendants(pid) if (c := command_line(p)) is not None}


def _running_after(pids: dict[int, str], timeout: float) -> dict[int, str]:
    """Those of ``pids`` still running after waiting up to ``timeout`` s for each to end (they
    are not our children: their pidfd turns readable when they exit)."""
    deadline = time.monotonic() + timeout
    running = {}
    for pid, cmdline in pids.items():
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                running[pid] = cmdline
        finally:
            os.close(fd)
    return running


def test_sigterm_stops_a_local_run_with_a_checkpoint(tmp_path: Path) -> None:
    proc = _train("ppo", "--env", "CartPole-v1", "--backend", "local", *TINY,
                  "--out", str(tmp_path / "run"))  # fmt: skip
    head = _wait_for_progress(proc)
    out = head + _terminate(proc)
    _check_stopped_with_a_checkpoint(proc.returncode, out)
    assert str(tmp_path / "run") in out


def test_sigterm_stops_a_restored_run_with_a_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    code = main(["train", "ppo", "--env", "CartPole-v1", "--backend", "local", *TINY,
                 "--stop-iters", "1", "--out", str(run_dir)])  # fmt: skip
    assert code == 0
    proc = _train("--restore", str(run_dir), "--backend", "local", "--stop-iters", "1000000")
    out = _wait_for_progress(proc) + _terminate(proc)
    _check_stopped_with_a_checkpoint(proc.returncode, out)
    assert "resuming ppo" in out


@pytest.mark.ray
@pytest.mark.timeout(240)
def test_sigterm_stops_a_ray_run_and_everything_it_started(tmp_path: Path) -> None:
    proc = _train("ppo", "--env", "CartPole-v1", "--backend", "ray", *TINY,
                  "--out", str(tmp_path / "run"))  # fmt: skip
    head = _wait_for_progress(proc)
    started = _descendants(proc.pid)
    assert any("raylet" in cmdline for cmdline in started.values()), started
    out = head + _terminate(proc)
    _check_stopped_with_a_checkpoint(proc.returncode, out)
    assert _running_after(started, STOP_BUDGET_S) == {}


@pytest.mark.ray
@pytest.mark.timeout(240)
def test_sigterm_to_the_whole_process_group_still_saves_and_exits_143(tmp_path: Path) -> None:
    # Slurm's scancel (without --batch) signals the job's whole process group: Ray's own
    # processes get the SIGTERM too, and the run must neither hang on the lost session (Ray
    # waits 60 s for its GCS, then ends the process with status 1) nor lose its checkpoint.
    proc = _train("ppo", "--env", "CartPole-v1", "--backend", "ray", *TINY,
                  "--stop-iters", "1000000", "--out", str(tmp_path / "run"),
                  own_group=True)  # fmt: skip
    head = _wait_for_progress(proc)
    started = _descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=STOP_BUDGET_S)
    _check_stopped_with_a_checkpoint(proc.returncode, head + out)
    assert _running_after(started, KILLED_BOUND_S) == {}


@pytest.mark.ray
@pytest.mark.timeout(240)
def test_sigterm_while_ray_starts_exits_143_and_leaves_nothing(tmp_path: Path) -> None:
    proc = _train("ppo", "--env", "CartPole-v1", "--backend", "ray", *TINY,
                  "--out", str(tmp_path / "run"))  # fmt: skip
    deadline = time.monotonic() + 120
    started: dict[int, str] = {}
    while not any("reaper.py" in c for c in started.values()):  # started just before ray.init
        assert proc.poll() is None and time.monotonic() < deadline
        started = _descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=STOP_BUDGET_S)
    assert proc.returncode == EXIT_TERMINATED, out
    assert "terminated (SIGTERM)" in out and "Traceback" not in out, out
    # What Ray had started carries the session's mark (and the test session's check at the end
    # catches anything else the command started).
    deadline = time.monotonic() + KILLED_BOUND_S
    while session_processes(f"{proc.pid}-") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_processes(f"{proc.pid}-") == []
    assert _running_after(started, KILLED_BOUND_S) == {}


KILLED_BOUND_S = 20.0
"""How long the Ray of a SIGKILLed driver may outlive it on a loaded CI machine (its reaper:
end-of-file at once, then SIGTERM and at most 3 s to SIGKILL)."""


@pytest.mark.ray
@pytest.mark.timeout(240)
def test_sigkill_of_the_driver_leaves_no_ray_process_behind(tmp_path: Path) -> None:
    proc = _train("ppo", "--env", "CartPole-v1", "--backend", "ray", *TINY,
                  "--stop-iters", "1000000", "--out", str(tmp_path / "run"))  # fmt: skip
    _wait_for_progress(proc)
    started = _descendants(proc.pid)
    marked = set(session_processes(f"{proc.pid}-"))
    assert any("raylet" in cmdline for cmdline in started.values()), started
    assert any("ray::RolloutWorker" in started[pid] for pid in marked), "workers are marked"
    proc.kill()  # SIGKILL: no handler, no atexit, no ray.shutdown()
    proc.wait()
    assert _running_after(started, KILLED_BOUND_S) == {}


PAIRED_HOOKS_OFF_MAIN = """
import os, sys, threading
paired = []
register = os.register_at_fork
def spy(**hooks):
    if "before" in hooks and threading.current_thread() is not threading.main_thread():
        frame = sys._getframe(1)
        paired.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
    register(**hooks)
os.register_at_fork = spy
from rlflow.cli.commands import _ImportBeside
_ImportBeside("rlflow.trainer").wait()
print(paired)
"""


def test_the_trainer_import_beside_ray_start_registers_no_paired_fork_hooks() -> None:
    # ray.init forks with a preexec_fn while the CLI imports the trainer on a thread: a
    # before/after_in_parent pair registered there mid-fork printed "Exception ignored ...
    # release unlocked lock" with a traceback on a CI run's stderr.
    done = subprocess.run(
        [sys.executable, "-c", PAIRED_HOOKS_OFF_MAIN], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_stop_signals_raise_once_then_exit_and_restore_the_handlers(
    default_handlers: None,
) -> None:
    stop = StopSignals()
    stop.install()
    with pytest.raises(Terminated):
        signal.raise_signal(signal.SIGTERM)
    with pytest.raises(SystemExit) as forced:
        signal.raise_signal(signal.SIGINT)
    assert forced.value.code == 130
    stop.restore()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_stop_signals_stop_on_ctrl_c_and_leave_an_ignored_one_ignored(
    default_handlers: None,
) -> None:
    stop = StopSignals()
    stop.install()
    with pytest.raises(KeyboardInterrupt) as first:
        signal.raise_signal(signal.SIGINT)
    assert type(first.value) is KeyboardInterrupt
    with pytest.raises(SystemExit) as forced:
        signal.raise_signal(signal.SIGTERM)
    assert forced.value.code == EXIT_TERMINATED
    stop.restore()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    StopSignals().install()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_stop_signals_defer_a_signal_while_the_backend_starts_and_raise_it_after(
    default_handlers: None,
) -> None:
    stop = StopSignals()
    stop.install()
    reached = []
    with pytest.raises(Terminated), stop.deferred():
        signal.raise_signal(signal.SIGTERM)  # recorded, not raised here
        reached.append("the end of the start")
    assert reached == ["the end of the start"]
    with pytest.raises(SystemExit):  # a second one still exits at once
        signal.raise_signal(signal.SIGTERM)
    stop.restore()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the point
def test_a_stop_signal_python_dropped_is_raised_once_the_start_is_over(
    default_handlers: None,
) -> None:
    stop = StopSignals()
    stop.install()

    class Dropping:
        def __del__(self) -> None:  # an exception raised here is printed and ignored
            signal.raise_signal(signal.SIGTERM)

    Dropping()  # the handler's Terminated is dropped with the finalizer's
    with pytest.raises(Terminated):
        stop.raise_received()
    stop.restore()


@pytest.mark.ray
def test_ray_init_inside_the_cli_start_keeps_the_stop_handler(default_handlers: None) -> None:
    from rlflow.cli.commands import _ray_init_keeps_handlers

    stop = StopSignals()
    stop.install()
    import ray._private.utils as ray_utils

    ray_set = ray_utils.set_sigterm_handler
    with _ray_init_keeps_handlers("ray"):
        ray_utils.set_sigterm_handler(lambda signum, frame: None)  # what ray.init does first
        assert signal.getsignal(signal.SIGTERM) == stop._handle
    assert ray_utils.set_sigterm_handler is ray_set
    stop.restore()


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


@pytest.mark.ray
def test_a_sigterm_during_a_ray_call_still_stops_as_sigterm(
    ray_backend: None, default_handlers: None
) -> None:
    """Ray turns the `Terminated` that the handler raises while the main thread waits in
    ``ray.get`` into a plain `KeyboardInterrupt`; the stop is still SIGTERM's (exit 143). Found
    by ``benchmarks/soak.py``: a driver SIGTERMed while it waited on its actors saved its
    checkpoint but said "interrupted" and exited 130, as after Ctrl-C."""
    import ray

    stop = StopSignals()
    stop.install()
    task = flow.remote(_sleep).remote(60.0)
    killer = threading.Timer(1.0, os.kill, args=(os.getpid(), signal.SIGTERM))
    killer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            flow.get(task)
    finally:
        killer.join()
        stop.restore()
        ray.cancel(task, force=True)
    assert terminated_by_sigterm(caught.value)

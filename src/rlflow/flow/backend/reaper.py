"""A local Ray that rlflow starts never outlives its driver, even one killed by SIGKILL.

``ray.init()`` without an address starts Ray's processes (GCS, raylet, agents, then the worker
processes the raylet starts) as children of the driver. They mostly stop when it dies, but not
all of them: after a SIGKILL of the driver, Ray 2.60's ``ray::DashboardAgent`` and
``ray::RuntimeEnvAgent`` were still alive a minute later, and a worker process of a session was
once found alive 45 minutes after its raylet was gone. So `start_local_ray` marks the session
and leaves a reaper behind:

- **The mark.** For the duration of ``ray.init`` the driver's environment holds
  ``RLFLOW_RAY_SESSION=<token>`` (`SESSION_ENV`), which every process Ray starts inherits (the
  raylet passes its environment on to the workers it starts); the driver's own environment is
  restored at once.
- **The reaper.** A small process started before ``ray.init`` (this file run as a script: the
  standard library only, no rlflow or Ray import; 2 ms of the start-up), in a session of its
  own, holding the read end of a pipe whose write end only the driver holds (not inherited by
  any child). When the driver ends, however it ends, the pipe reaches end-of-file;
  `flow.shutdown` closes it too, after ``ray.shutdown()``. The reaper then sends SIGTERM to
  every process that carries the token and to the driver's descendants it noted (while Ray
  started, after ``ray.init`` and every `REFRESH_S`: Ray's agents rename themselves, which can
  overwrite their environment and the mark in it), waits up to `GRACE_S` for them to exit, and
  SIGKILLs the rest.

Linux only (it reads ``/proc``); elsewhere `start_local_ray` is plain ``ray.init`` and no
reaper runs.

`stop_monitor` SIGKILLs the session's autoscaler monitor just before ``ray.shutdown()`` (why: its
docstring). `session_processes` lists the processes of a mark, `descendants` those below a
process and `command_line` names one (for tests and checks).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

__all__ = [
    "GRACE_S",
    "SESSION_ENV",
    "command_line",
    "descendants",
    "end_session",
    "session_processes",
    "start_local_ray",
    "stop_monitor",
]

SESSION_ENV = "RLFLOW_RAY_SESSION"
"""The environment variable that marks the processes of a Ray session rlflow started."""
GRACE_S = 3.0
"""Seconds between the reaper's SIGTERM and its SIGKILL of what is left."""
STARTING_S = 0.5
"""How often the reaper notes the driver's descendants while Ray starts."""
REFRESH_S = 10.0
"""How often it notes them after (a scan of ``/proc``: a few milliseconds)."""

MONITOR_SCRIPTS = (
    os.path.join("ray", "autoscaler", "_private", "monitor.py"),
    os.path.join("ray", "autoscaler", "v2", "monitor.py"),
)
"""The scripts of Ray's autoscaler monitor process (v1 and v2), as its command line names them."""

_pipe_write_end: int | None = None
_session_token: str | None = None


def start_local_ray(**ray_init_kwargs: Any) -> None:
    """``ray.init(**ray_init_kwargs)`` (a local Ray: no ``address``) with its processes marked
    and a reaper that stops them when this process ends (see the module docstring), started
    first: a driver stopped while Ray starts leaves nothing behind either."""
    import ray

    global _session_token
    token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    _start_reaper(token)
    _session_token = token if _pipe_write_end is not None else None
    before = os.environ.get(SESSION_ENV)
    os.environ[SESSION_ENV] = token
    try:
        ray.init(**ray_init_kwargs)
    except BaseException:
        end_session()  # the reaper stops what had started
        raise
    finally:
        if before is None:
            os.environ.pop(SESSION_ENV, None)
        else:
            os.environ[SESSION_ENV] = before
    _note_started()


def _start_reaper(token: str) -> None:
    global _pipe_write_end
    if not os.path.isdir("/proc"):
        return
    end_session()  # a reaper of an earlier session in this process sweeps it now
    read_end, write_end = os.pipe()  # not inheritable: only this process holds write_end
    env = {k: v for k, v in os.environ.items() if k != SESSION_ENV}
    subprocess.Popen(
        [sys.executable, "-I", os.path.abspath(__file__), token, str(read_end), str(os.getpid())],
        pass_fds=(read_end,),
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(read_end)
    _pipe_write_end = write_end


def _note_started() -> None:
    """Send the reaper this process's descendants now (``pid:start time`` pairs, one line):
    Ray's processes of ``ray.init``, its agents among them, in which the mark may not survive."""
    if _pipe_write_end is not None:
        pairs = ",".join(f"{pid}:{start}" for pid, start in descendants(os.getpid()).items())
        os.write(_pipe_write_end, f"{pairs}\n".encode())


def end_session() -> None:
    """Tell the reaper of this process's Ray session (if any) that the session ended: it
    sweeps what is left of it now (after ``ray.shutdown()``) and exits."""
    global _pipe_write_end, _session_token
    _session_token = None
    if _pipe_write_end is not None:
        os.close(_pipe_write_end)
        _pipe_write_end = None


def stop_monitor() -> list[int]:
    """SIGKILL the autoscaler monitor of the local Ray this process started (`start_local_ray`,
    its session not ended yet); the pids killed ([] without such a session, or without
    ``/proc``). `rlflow.flow.shutdown` calls it just before ``ray.shutdown()``.

    Why: ``ray.shutdown()`` stops the raylet and the GCS first, then sends the monitor SIGTERM
    and waits up to 1 s for it before its SIGKILL. The monitor's SIGTERM handler reports an
    "autoscaler failed" error to the drivers through the GCS, gone by then, and takes the whole
    second (Ray 2.60: 1.01 s of a 1.14 s ``ray.shutdown()``; with the GCS still up, 0.6 s and
    that error printed on the driver's stderr). A local Ray's monitor has nothing left to do
    at the end of the session (no nodes to add or remove), so it gets the SIGKILL first; Ray
    then finds it exited and reaps it.
    """
    if _session_token is None:
        return []
    killed = []
    for pid in session_processes(_session_token):
        if any(arg.endswith(MONITOR_SCRIPTS) for arg in _argv(pid) or []):
            with contextlib.suppress(OSError):  # gone since
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def session_processes(token_prefix: str, *, env: str = SESSION_ENV) -> list[int]:
    """The live (not zombie) processes whose environment has ``env`` set to a value starting
    with ``token_prefix``, but this one; [] where there is no ``/proc``."""
    if not os.path.isdir("/proc"):
        return []
    wanted = f"{env}={token_prefix}".encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                entries = f.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z" and any(e.startswith(wanted) for e in entries):
            found.append(int(name))
    return found


def _stat(pid: int) -> tuple[int, bytes, int] | None:
    """``(parent pid, state, start time)`` of ``pid`` from ``/proc``; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), fields[0], int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """``{pid: start time}`` of the processes below ``root`` now (children, their children...);
    {} where there is no ``/proc``."""
    if not os.path.isdir("/proc"):
        return {}
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None:
                children.setdefault(stat[0], []).append(int(name))
                starts[int(name)] = stat[2]
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def command_line(pid: int) -> str | None:
    """The command line of ``pid`` (arguments joined by spaces), None if it is gone."""
    argv = _argv(pid)
    return None if argv is None else " ".join(argv).strip()


def _argv(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [arg.decode(errors="replace") for arg in raw.split(b"\0")]


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):  # gone since
            os.kill(pid, sig)


def _reap(token: str, read_end: int, driver: int) -> None:
    """The reaper's body: wait for the driver's end, then stop the session's processes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver's Ctrl-C is not ours
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _stop(token, _wait_for_end(read_end, driver))


def _wait_for_end(read_end: int, driver: int) -> dict[int, int]:
    """Wait for end-of-file on ``read_end``; the driver's descendants seen meanwhile.

    Processes that rename themselves (``setproctitle``: Ray's agents) may overwrite their
    environment, mark included; so the reaper keeps the driver's descendants too, by pid and
    start time (a pid reused since is not theirs): those the driver sends after ``ray.init``
    and those it sees itself, every `STARTING_S` until then and every `REFRESH_S` after."""
    me = os.getpid()
    seen: dict[int, int] = {}
    noted, pending = False, b""
    while True:
        try:
            ready, _, _ = select.select([read_end], [], [], REFRESH_S if noted else STARTING_S)
            data = os.read(read_end, 65536) if ready else None
        except InterruptedError:
            continue
        except OSError:
            return seen
        if data == b"":
            return seen  # the driver ended, or ended the session
        if data is None:
            seen.update(descendants(driver))
            seen.pop(me, None)
            continue
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            pairs = (item.split(b":") for item in line.split(b",") if item)
            seen.update({int(pid): int(start) for pid, start in pairs})
            noted = True


def _stop(token: str, seen: dict[int, int]) -> None:
    """SIGTERM the processes marked with ``token`` and those of ``seen`` still running, then
    SIGKILL what is left after `GRACE_S`."""
    me = os.getpid()

    def left() -> list[int]:
        alive = set(session_processes(token))
        for pid, start in seen.items():
            stat = _stat(pid)
            if stat is not None and stat[2] == start and stat[1] != b"Z":
                alive.add(pid)
        return sorted(alive - {me})

    pids = left()
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while pids and time.monotonic() < deadline:
        time.sleep(0.1)
        pids = left()
    _signal_all(pids, signal.SIGKILL)


if __name__ == "__main__":
    _reap(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))

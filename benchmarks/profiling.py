"""Where a benchmark's time goes: profiles of a timed window (the plans' benchmarks use it).

`profiled(prefix, seconds)` wraps a window and writes, beside ``prefix``:

- ``<prefix>.stacks.txt``: this process's Python threads sampled from inside (every
  ``1 / rate`` s, ``sys._current_frames``), as collapsed stacks ``thread;outer;...;inner count``,
  most frequent first. It needs no permissions, and it sees every thread, waiting or not: a
  stack that ends in a lock's ``wait`` or a queue's ``get`` is a thread that waits.
- ``<prefix>.pyspy-<name>.txt``: with ``py-spy`` on the PATH, its collapsed stacks
  (``--format raw``, by thread, active samples only: what runs) of this process and of the
  first Ray actor process of each name in ``actors`` (found by their process titles,
  ``ray::Name``); the ``.log`` beside each says why one is missing (py-spy needs ptrace
  rights over the process).
- ``<prefix>.top.txt``: two frames of ``top`` over the window (the second is the window's
  CPU use of every process).

The stack files are plain text: ``sort -k2 -n`` or a flame-graph tool reads them.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import IO, Any


def _collapsed(frame: Any) -> str:
    names = []
    while frame is not None:
        code = frame.f_code
        names.append(f"{code.co_name} ({os.path.basename(code.co_filename)}:{frame.f_lineno})")
        frame = frame.f_back
    return ";".join(reversed(names))


def _sample_threads(path: str, rate: float, stop: threading.Event) -> None:
    counts: collections.Counter[str] = collections.Counter()
    me = threading.get_ident()
    while not stop.wait(1.0 / rate):
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident != me:
                counts[f"{names.get(ident, ident)};{_collapsed(frame)}"] += 1
    with open(path, "w") as f:
        for stack, count in counts.most_common():
            f.write(f"{stack} {count}\n")


def _actor_pid(name: str) -> int | None:
    """The lowest pid whose process title starts with ``ray::<name>``."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read().startswith(f"ray::{name}".encode()):
                    pids.append(int(entry))
    return min(pids, default=None)


@contextlib.contextmanager
def profiled(
    prefix: str | None, seconds: float, *, actors: Sequence[str] = (), rate: float = 50.0
) -> Iterator[None]:
    """Profile the body (a window of about ``seconds``) into files beside ``prefix`` (see the
    module's docstring); nothing when ``prefix`` is None."""
    if prefix is None:
        yield
        return
    stop = threading.Event()
    sampler = threading.Thread(
        target=_sample_threads, args=(f"{prefix}.stacks.txt", rate, stop), daemon=True
    )
    sampler.start()
    children: list[tuple[subprocess.Popen[bytes], IO[Any]]] = []
    spy = shutil.which("py-spy")
    targets = {"driver": os.getpid(), **{name: _actor_pid(name) for name in actors}}
    for name, pid in targets.items():
        log = open(f"{prefix}.pyspy-{name}.log", "w")  # noqa: SIM115 (closed after the wait)
        if spy is None or pid is None:
            log.write("py-spy is not on the PATH\n" if spy is None else f"no ray::{name}\n")
            log.close()
            continue
        command = [spy, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds)))]
        command += ["--rate", "100", "--format", "raw", "--threads", "--nonblocking"]
        command += ["--output", f"{prefix}.pyspy-{name}.txt"]
        children.append((subprocess.Popen(command, stdout=log, stderr=log), log))
    top = shutil.which("top")
    if top is not None:
        out = open(f"{prefix}.top.txt", "w")  # noqa: SIM115 (closed after the wait)
        delay = f"{max(seconds * 0.8, 1.0):.1f}"
        command = [top, "-b", "-c", "-n", "2", "-d", delay, "-w", "250"]
        children.append((subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT), out))
    began = time.perf_counter()
    try:
        yield
    finally:
        stop.set()
        sampler.join()
        for child, file in children:
            left = seconds + 30 - (time.perf_counter() - began)
            try:
                child.wait(timeout=max(left, 1.0))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            file.close()

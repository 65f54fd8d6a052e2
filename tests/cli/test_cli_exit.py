"""How the ``rlflow`` command ends: `rlflow.cli.run` exits with `main`'s status without the
interpreter's teardown (`rlflow.cli.exit_after`), after everything ``sys.exit`` would have
finished; a closed stdout pipe ends it quietly.

Each case runs a fresh interpreter (``os._exit`` ends the process that calls it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )


def test_exit_after_runs_the_atexit_handlers_flushes_and_keeps_the_status() -> None:
    done = _python(
        """
        import atexit, logging, sys
        from rlflow.cli import exit_after
        logging.basicConfig(stream=sys.stderr, format="%(message)s")
        atexit.register(lambda: print("atexit ran", flush=False))
        sys.stdout.write("buffered, not flushed")  # no newline: still in the buffer
        logging.getLogger("x").warning("logged")
        exit_after(7)
        print("never")
        """
    )
    assert done.returncode == 7, done.stderr
    assert done.stdout == "buffered, not flushedatexit ran\n"
    assert done.stderr == "logged\n"


def test_exit_after_waits_for_a_running_thread_that_is_not_a_daemon() -> None:
    done = _python(
        """
        import threading, time
        from rlflow.cli import exit_after
        def late():
            time.sleep(0.5)
            print("the thread finished")
        threading.Thread(target=late).start()
        exit_after(3)
        """
    )
    assert (done.returncode, done.stdout) == (3, "the thread finished\n"), done.stderr


def test_exit_after_skips_the_teardown_that_runs_finalizers() -> None:
    """The teardown it skips is the interpreter's own: an object collected only there never
    has its finalizer run (it would print), while sys.exit runs it."""
    code = """
        import sys
        from rlflow.cli import exit_after
        class Loud:
            def __del__(self):
                print("finalized in the teardown")
        sys.modules["__main__"].keep = Loud()
        {}(0)
        """
    assert _python(code.format("exit_after")).stdout == ""
    assert _python(code.format("sys.exit")).stdout == "finalized in the teardown\n"


def test_rlflow_list_into_a_closed_pipe_exits_1_without_a_traceback() -> None:
    """The reader is gone before the command writes (its end of the pipe closed first), as
    when ``head -1`` has its line: every write fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rlflow", "list"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=50,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (1, "")


def test_the_console_script_and_python_m_run_the_fast_exit() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["rlflow"] == "rlflow.cli:run"
    done = subprocess.run(
        [sys.executable, "-m", "rlflow", "train", "nope"],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("rlflow: error: unknown algorithm 'nope'"), done.stderr

"""The ``rlflow`` command line: train, serve, evaluate, show a plan, list algorithms, plot,
export.

::

    rlflow train ppo --env CartPole-v1 --num-workers 2 --stop-reward 450
    rlflow train --restore runs/ppo_CartPole-v1_20250101-120000 --stop-iters 200
    rlflow serve ppo --env CartPole-v1 --port 9900   # train on external simulators' episodes
    rlflow evaluate runs/ppo_CartPole-v1_20250101-120000/checkpoint_000010 --episodes 20
    rlflow plan a3c --env CartPole-v1
    rlflow list
    rlflow plot runs/ppo_seed0 runs/ppo_seed1 --y episode_return_mean -o curves.png
    rlflow export runs/ppo_CartPole-v1_20250101-120000 -o exported/ppo   # rlflow.load_policy
    rlflow --version                                  # also: python -m rlflow --version

The config of ``train`` is layered, later wins: the algorithm's defaults, the tuned config
shipped for ALGO+ENV (``--tuned``, on by default; ``--tuned-for gpu``: the one sized for a GPU
learner), ``--config FILE.yaml``, the flags
(``--env``, ``--num-workers``, ``--seed``), then ``--set key=value``. A config file is either a
mapping of config fields, or a mapping with ``config:`` (fields), ``stop:`` (result key ->
threshold) and optionally ``env:``. Bad input prints one ``rlflow: error: ...`` line and exits
with status 2 before any actor starts.

``train`` stops on Ctrl-C (exit status 130) or SIGTERM, as a cluster scheduler sends it (exit
status 143), the way it stops at its stop criteria: the iteration under way is abandoned, a
final checkpoint is saved, the actors and the Ray it started are stopped. A second Ctrl-C or
SIGTERM during that stop exits at once (the last checkpoint written stays valid).

``serve`` trains like ``train`` (same config layers, stop criteria and signals), on the
episodes of external simulators that talk to its `rlflow.serve.PolicyServer` (sampling in this
process, the local backend by default).

``train --restore CHECKPOINT_OR_RUN_DIR`` continues a run instead: the checkpoint's config with
the flags on top, progress appended in its run dir, stop criteria over the whole run.

Modules: `rlflow.cli.parser` (flags), `rlflow.cli.resolve` (config layers, stop criteria),
`rlflow.cli.resume` (what ``--restore`` continues), `rlflow.cli.commands` (the sub-commands),
`rlflow.cli.output` (progress lines, run dir), `rlflow.cli.plot` (learning curves); results
are written by the trainer's loggers (`rlflow.loggers`); files are read by
`rlflow.config.files`, the loader `rlflow.algorithms.tuned_config` uses too.
"""

from __future__ import annotations

import atexit
import logging
import os
import select
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from rlflow.cli.commands import (
    COMMANDS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    terminated_by_sigterm,
)
from rlflow.cli.parser import UsageError, build_parser
from rlflow.errors import ConfigError, RLFlowError

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "exit_after",
    "main",
    "run",
]


def _error(message: str) -> int:
    sys.stderr.write(f"rlflow: error: {message}\n")
    return EXIT_USAGE


def _log_to_stderr() -> logging.Handler:
    """Send rlflow's INFO logs to stderr (``-v``); the caller removes the handler."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    log = logging.getLogger("rlflow")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``rlflow`` command line; return the exit status (2 for bad input)."""
    try:
        args = build_parser().parse_args(argv)
    except UsageError as err:
        return _error(str(err))
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    log = logging.getLogger("rlflow")
    level = log.level
    handler = _log_to_stderr() if args.verbose else None
    try:
        return COMMANDS[args.command](args)
    except ConfigError as err:
        return _error(" ".join(str(err).split("\n")))
    except RLFlowError as err:
        notes = "".join(f"\n  {note}" for note in getattr(err, "__notes__", ()))
        sys.stderr.write(f"rlflow: error: {type(err).__name__}: {err}{notes}\n")
        return 1
    except KeyboardInterrupt as err:  # outside the training loop: before it or after it
        if not terminated_by_sigterm(err):
            raise
        sys.stderr.write("rlflow: terminated (SIGTERM) outside the training loop\n")
        return EXIT_TERMINATED
    finally:
        if handler is not None:
            log.removeHandler(handler)
            log.setLevel(level)


def run() -> NoReturn:
    """The ``rlflow`` console script (and ``python -m rlflow``): `main` on ``sys.argv``, then
    exit with its status without the interpreter's teardown (`exit_after`).

    A reader of stdout that goes away early (``rlflow list | head -1``) ends the command
    quietly with status 1, as Python's documentation advises for ``SIGPIPE``, not with a
    ``BrokenPipeError`` traceback.
    """
    try:
        code = main()
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # a pipe of the run's own (a socket, a worker's), not stdout
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error
        code = 1
    exit_after(code)


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reading end is closed (``poll`` reports an error on
    the writing end then)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no fd, or no poll (Windows)
        return False


def exit_after(code: int) -> NoReturn:
    """End the process with status ``code`` the way ``sys.exit`` would, less the teardown.

    The ``atexit`` handlers run (logging's flush, Ray's shutdown of what is still
    connected), stdout and stderr are flushed, then ``os._exit``: the interpreter does not
    tear its modules down. With torch, Gymnasium and Ray loaded that teardown takes about
    0.6 s on a 2-core machine (measured: ``import torch, gymnasium, ray`` exits in 1.91 s,
    1.36 s with ``os._exit``), after every file and process of the run is closed. Where a
    thread that is not a daemon still runs, this is plain ``sys.exit`` (it waits for them).
    """
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()  # what sys.exit runs too; os._exit would skip them
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # its reader or file is gone: nothing more to say
            code = code or 120  # what CPython exits with when that flush fails
    os._exit(code)

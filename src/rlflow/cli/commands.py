"""The ``rlflow`` sub-commands: ``train``, ``serve``, ``evaluate``, ``plan``, ``list``,
``plot``, ``export``.

Each takes the parsed arguments and returns the exit status; bad input raises `ConfigError`
(printed by `rlflow.cli.main` as one line, exit status 2) before any actor starts. ``train``
stops on Ctrl-C (exit status 130) or SIGTERM (143, `Terminated`) as it does at its stop
criteria: with a final checkpoint, its actors and the backend it started stopped; a second
signal during that stop exits at once (`StopSignals`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from rlflow import storage
from rlflow.cli.output import (
    evaluation_games,
    jsonable,
    make_run_dir,
    progress_line,
    seat_outcomes,
    summary,
    write_yaml,
)
from rlflow.cli.resolve import resolve_run, served_spaces, should_stop, stop_criteria
from rlflow.cli.resume import prepare_progress, resolve_resume
from rlflow.config.files import tuned_envs
from rlflow.errors import ConfigError

__all__ = [
    "COMMANDS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "StopSignals",
    "Terminated",
    "terminated_by_sigterm",
]

EXIT_OK = 0
"""Exit status of a finished command."""
EXIT_USAGE = 2
"""Exit status for bad input (usage, config, files)."""
EXIT_INTERRUPTED = 130
"""Exit status of a training run stopped by Ctrl-C (after its checkpoint is saved)."""
EXIT_TERMINATED = 143
"""Exit status of a training run stopped by SIGTERM (after its checkpoint is saved)."""
_STOPPED_EXIT = {"interrupted": EXIT_INTERRUPTED, "terminated": EXIT_TERMINATED}
"""The exit status of a run stopped by a signal, by the reason `_train_loop` gives."""


_stop_signal: int | None = None
"""The signal that began this process's stop (set by `StopSignals`)."""


def terminated_by_sigterm(err: KeyboardInterrupt) -> bool:
    """Whether ``err`` stops the run because of SIGTERM: a `Terminated`, or a plain
    `KeyboardInterrupt` after `StopSignals` saw SIGTERM. Ray turns an exception a signal
    handler raises during a blocking call (``ray.get``, ``ray.wait``) into a plain
    `KeyboardInterrupt`, so a SIGTERM that lands there arrives without its type."""
    return isinstance(err, Terminated) or _stop_signal == signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived during ``rlflow train`` (raised in the main thread by `StopSignals`).

    A `KeyboardInterrupt`, so the run stops the way Ctrl-C stops it: the code that saves the
    final checkpoint on Ctrl-C handles both.
    """


class StopSignals:
    """SIGTERM and SIGINT handlers for a training run, installed in the main thread only.

    The first signal stops the run the way Ctrl-C does: SIGTERM raises `Terminated`, SIGINT
    `KeyboardInterrupt`. A second one, while that stop saves the checkpoint and stops the
    actors, raises ``SystemExit(128 + signum)`` at once (the last checkpoint stays valid:
    checkpoints are written atomically). A SIGINT that was ignored stays ignored.

    Construction records the handlers in effect; `install` replaces them, `restore` puts them
    back. While the backend starts (`deferred`) a first signal is only recorded and raised when
    the start is over: raised inside ``ray.init`` it could land in a callback where Python
    prints and drops it, and the run would go on.
    """

    def __init__(self) -> None:
        """Record the SIGTERM and SIGINT handlers in effect (none off the main thread)."""
        global _stop_signal
        _stop_signal = None
        self.stopping = False
        self.received: int | None = None
        """The first signal's number, once one arrived."""
        self._defer = False
        self._saved: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            self._saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def install(self) -> None:
        """Make SIGTERM, and SIGINT unless it was ignored, stop the run (`StopSignals`)."""
        for sig, previous in self._saved.items():
            if sig == signal.SIGTERM or previous is signal.default_int_handler:
                signal.signal(sig, self._handle)

    def restore(self) -> None:
        """Put back the handlers recorded at construction."""
        for sig, previous in self._saved.items():
            signal.signal(sig, previous)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Record a first signal in the block instead of raising it there; raise it (as
        `Terminated` or `KeyboardInterrupt`) when the block ends without an error of its own."""
        self._defer = True
        try:
            yield
        finally:
            self._defer = False
        self.raise_received()

    def raise_received(self) -> None:
        """Raise the stop for a signal that arrived (`deferred`, or raised where Python
        dropped it); nothing if none did."""
        if self.received is not None:
            raise Terminated if self.received == signal.SIGTERM else KeyboardInterrupt

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping:
            name = signal.Signals(signum).name
            os.write(2, f"\nrlflow: {name} again: exiting without waiting for the stop\n".encode())
            raise SystemExit(128 + signum)
        self.stopping = True
        self.received = signum
        global _stop_signal
        _stop_signal = signum
        if not self._defer:
            raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


@contextmanager
def _ray_init_keeps_handlers(backend: str) -> Iterator[None]:
    """While the block starts Ray, ``ray.init`` does not replace the SIGTERM handler.

    ``ray.init`` installs a handler of its own at its top (``sys.exit(SIGTERM)``, through
    ``ray._private.utils.set_sigterm_handler``): a SIGTERM then raises `SystemExit` wherever
    the main thread is, and in a callback (a fork hook, an import lock's) Python prints and
    ignores it; the run went on (a CI run's SIGTERM test). `StopSignals.deferred` handles a
    signal there instead. Without that function (another Ray) nothing changes.
    """
    utils: Any = importlib.import_module("ray._private.utils") if backend == "ray" else None
    setter = getattr(utils, "set_sigterm_handler", None)
    if setter is None:
        yield
        return
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = setter


@contextmanager
def _train_session(args: argparse.Namespace, setup: Any = None) -> Iterator[Any]:
    """The flow backend of a ``train`` command, with `StopSignals` from its start to its end;
    yields the remote workers started early for ``setup`` (a `TrainerSetup`), or None.

    Starts the backend named by ``args`` (unless one of that name runs: it is left running)
    while a thread imports the trainer (`_ImportBeside`), and shuts down the one it started,
    however the block ends; the signal handlers in effect before are back after that. Inside
    the block ``rlflow.trainer`` is imported.

    Connecting to a running Ray (``--address``) takes a fraction of a second, so there the
    order differs: connect, start ``setup``'s remote rollout workers
    (`rlflow.workers.placement.start_remote_workers`, which does not import torch), then
    import the trainer while the workers' processes import the same on the other cores. The
    `Trainer` adopts them (``started_workers``); those it did not adopt are stopped when the
    block ends.
    """
    from rlflow import flow

    early = setup is not None and args.backend == "ray" and bool(args.address)
    # num_envs_per_worker="auto" is measured by the Trainer before its workers start.
    early = early and setup.config.num_envs_per_worker != "auto"
    trainer_module = None if early else _ImportBeside("rlflow.trainer")
    signals = StopSignals()
    started = False
    workers = None
    try:
        signals.install()  # a SIGTERM while Ray starts: exit 143, Ray's processes reaped
        with signals.deferred(), _ray_init_keeps_handlers(args.backend):
            started = _start_backend(
                args.backend, args.address, verbose=args.verbose, timeout_s=args.ray_init_timeout
            )
        signals.install()  # again, in case another Ray set a SIGTERM handler of its own
        if trainer_module is None:
            from rlflow.workers.placement import start_remote_workers

            workers = start_remote_workers(setup.config, setup.algorithm.policy_ref)
            importlib.import_module("rlflow.trainer")
        else:
            trainer_module.wait()
        signals.raise_received()  # one raised where Python dropped it
        yield workers
    finally:
        try:
            if workers is not None:
                workers.stop()  # those no Trainer adopted
            if started:
                flow.shutdown()
        finally:
            signals.restore()


def _start_backend(
    name: str, address: str | None, *, verbose: bool, timeout_s: float = 15.0
) -> bool:
    """Start the flow backend for a CLI run (quiet Ray unless -v; an ``address`` tried for
    ``timeout_s``); True if started here."""
    from rlflow import flow

    if flow.is_initialized() and flow.backend_name() == name:
        return False
    kwargs: dict[str, Any] = {}
    if name == "ray":
        kwargs["logging_level"] = logging.INFO if verbose else logging.WARNING
        kwargs["ray_init_timeout_s"] = timeout_s
        if address:
            kwargs["address"] = address
    flow.init(name, **kwargs)
    return True


class _ImportBeside:
    """Imports ``module`` on a thread while the caller goes on (the CLI starts Ray meanwhile).

    The trainer's imports (torch, the workers, the operators: about 1.5 s on a 2-core machine)
    and `ray.init` (mostly waiting for Ray's processes) overlap, so a Ray run starts about that
    much sooner; the config was checked before either began, without torch (`rlflow.setup`).
    """

    FORK_PAIRED_IMPORTS = ("concurrent.futures.thread",)
    """Modules the trainer imports that register a ``before``/``after_in_parent`` pair with
    `os.register_at_fork`; imported on the caller's thread first. `ray.init` forks with a
    ``preexec_fn`` (which runs the at-fork hooks) while this thread imports: a pair registered
    between one fork's ``before`` and ``after_in_parent`` hooks runs only the second, and
    CPython prints "Exception ignored ... release unlocked lock" on stderr."""

    def __init__(self, module: str) -> None:
        """Start importing ``module``."""
        for name in self.FORK_PAIRED_IMPORTS:
            importlib.import_module(name)
        self.module = module
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._load, name="rlflow-import", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        try:
            importlib.import_module(self.module)
        except BaseException as err:  # noqa: BLE001 (the import is retried by wait())
            self.error = err

    def wait(self) -> None:
        """Wait for the import; if it failed on the thread, import again here (raising as a
        plain import would: a module two threads imported at once can fail on one of them)."""
        self._thread.join()
        if self.error is not None:
            importlib.import_module(self.module)


def _check_train_flags(args: argparse.Namespace) -> None:
    if not args.ray_init_timeout > 0:
        raise ConfigError(f"--ray-init-timeout {args.ray_init_timeout}: must be > 0")
    if args.algo is None and not args.restore:
        raise ConfigError("train: ALGO is required (or --restore CHECKPOINT_OR_RUN_DIR)")
    if args.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every {args.checkpoint_every}: must be >= 0")
    if args.address and args.backend == "local":
        raise ConfigError(f"--address {args.address!r} needs --backend ray")
    # Storage URIs before anything starts: the scheme, pyarrow's support, credentials, and
    # that the bucket answers.
    if args.out:
        storage.probe(args.out, "--out")
    if args.restore:
        storage.probe(args.restore, "--restore")
    if getattr(args, "output", None):
        storage.probe(args.output, "--output")


def _cmd_train(args: argparse.Namespace) -> int:
    _check_train_flags(args)
    if args.restore:
        return _resume(args)
    run = resolve_run(args)
    stop = stop_criteria(args, run.stop)
    # The run dir once the backend is up: none for a bad address.
    with _train_session(args, run.setup) as workers:
        what = f"training {run.algo} on {run.config.env}"
        return _fresh_run(args, run.setup, stop, what, workers=workers)


def _fresh_run(
    args: argparse.Namespace,
    setup: Any,
    stop: dict[str, float],
    what: str,
    env: Any = None,
    started: Callable[[Any], None] | None = None,
    workers: Any = None,
) -> int:
    """Train ``setup`` in a new run dir (``args.out``, else one named after the algorithm and
    ``env``, default the config's) until ``stop``; ``what`` heads the progress; ``started``
    is given the trainer once built; ``workers``: remote workers started for ``setup``
    (`rlflow.workers.placement.StartedWorkers`) for the trainer to adopt."""
    algo, config = setup.algorithm.name, setup.config
    fresh = not (args.out and storage.exists(args.out))
    run_dir = make_run_dir(args.out, algo, config.env if env is None else env)
    write_yaml(
        storage.join(run_dir, "config.yaml"),
        {"algorithm": algo, "config": config.to_dict(), "stop": stop},
    )
    from rlflow.trainer import Trainer

    try:
        trainer = Trainer(setup, backend=args.backend, logdir=run_dir, started_workers=workers)
    except BaseException:
        if fresh:  # made above, and no iteration ran in it (a given --out dir stays)
            if storage.is_remote(run_dir):
                storage.delete(run_dir)
            else:
                shutil.rmtree(run_dir, ignore_errors=True)
        raise
    if trainer.config is not config:  # num_envs_per_worker="auto": the number measured
        write_yaml(
            storage.join(run_dir, "config.yaml"),
            {"algorithm": algo, "config": trainer.config.to_dict(), "stop": stop},
        )
    if started is not None:
        started(trainer)
    with trainer:
        return _train_loop(
            trainer, run_dir, stop, args.checkpoint_every, f"{what} -> {run_dir}", None
        )


def _cmd_serve(args: argparse.Namespace) -> int:
    """``serve``: a `rlflow.serve.PolicyServer` in this process, the run training on its
    clients' episodes (`rlflow.serve.env.ExternalEnv`) until the stop criteria."""
    from rlflow.serve.server import PolicyServer
    from rlflow.setup import resolve_setup

    _check_train_flags(args)
    if args.concurrent_episodes < 1:
        raise ConfigError(f"--concurrent-episodes {args.concurrent_episodes}: must be >= 1")
    run = resolve_run(args)
    stop = stop_criteria(args, run.stop)
    observation_space, action_space = served_spaces(args.spaces, run.config)
    server = PolicyServer(
        observation_space,
        action_space,
        host=args.host,
        port=args.port,
        episode_timeout_s=args.episode_timeout,
        auth_token=args.auth_token,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        max_body_bytes=args.max_body_bytes,
    )
    config = run.config.replace(num_envs_per_worker=args.concurrent_episodes)
    server.check_config(config)  # before the port is taken
    with server:
        config = server.configure(config)
        setup = resolve_setup(run.setup.algorithm, config)
        with _train_session(args, setup) as workers:
            what = f"serving {run.algo} on {server.url} (spaces of {args.spaces or run.config.env})"
            return _fresh_run(
                args,
                setup,
                stop,
                what,
                env=f"served-{run.config.env}",
                started=lambda trainer: server.serve_policy(trainer.export_policy),
                workers=workers,
            )


def _resume(args: argparse.Namespace) -> int:
    """``train --restore``: the checkpoint's run continues in its run dir (`rlflow.cli.resume`)."""
    spec = resolve_resume(args)
    run = spec.run
    write_yaml(
        storage.join(spec.run_dir, "config.yaml"),
        {"algorithm": run.algo, "config": run.config.to_dict(), "stop": run.stop},
    )
    last = prepare_progress(spec.run_dir, spec.state)
    with _train_session(args):
        from rlflow.trainer import Trainer

        with Trainer.restore(
            spec.state, run.setup, backend=args.backend, logdir=spec.run_dir
        ) as trainer:
            header = (
                f"resuming {run.algo} on {trainer.config.env} from {spec.checkpoint} "
                f"(iteration {trainer.iteration}) -> {spec.run_dir}"
            )
            return _train_loop(trainer, spec.run_dir, run.stop, args.checkpoint_every, header, last)


def _train_loop(
    trainer: Any,
    run_dir: Path | str,
    stop: Mapping[str, float],
    every: int,
    header: str,
    last: dict[str, Any] | None,
) -> int:
    """Train until ``stop`` (the trainer's loggers write each result to the run dir); ``last``:
    a resumed run's last result (it may meet ``stop`` already: then nothing trains). A run dir
    in object storage gets each checkpoint uploaded, and the loggers' files with it."""
    out = sys.stdout
    crit = ", ".join(f"{k} >= {v:g}" for k, v in stop.items()) or "none (Ctrl-C to stop)"
    out.write(f"{header}; stop: {crit}\n")
    result, saved_at = last, -1 if last is None else trainer.iteration
    reason = "interrupted"
    if last is not None and (why := should_stop(last, stop)) is not None:
        return _finish(trainer, run_dir, result, f"already reached: {why}", saved_at)
    try:
        while True:
            result = trainer.train()
            out.write(progress_line(result) + "\n")
            out.flush()
            if every and result["iteration"] % every == 0:
                trainer.save(storage.join(run_dir, f"checkpoint_{result['iteration']:06d}"))
                saved_at = result["iteration"]
            if (why := should_stop(result, stop)) is not None:
                reason = why
                break
    except KeyboardInterrupt as stop_signal:
        terminated = terminated_by_sigterm(stop_signal)
        reason = "terminated" if terminated else "interrupted"
        signal_name = " (SIGTERM)" if terminated else ""
        out.write(f"\n{reason}{signal_name}: saving a checkpoint\n")
    return _finish(trainer, run_dir, result, reason, saved_at)


def _finish(
    trainer: Any, run_dir: Path | str, result: dict[str, Any] | None, reason: str, saved_at: int
) -> int:
    """Save the last checkpoint (unless saved), write ``result.json`` and the summary."""
    checkpoint = storage.join(run_dir, f"checkpoint_{trainer.iteration:06d}")
    if trainer.iteration != saved_at:
        trainer.save(checkpoint)
    if result is not None:
        text = json.dumps(jsonable(result), indent=2) + "\n"
        storage.write_text(storage.join(run_dir, "result.json"), text)
    summary(sys.stdout, trainer, result, reason, checkpoint, run_dir)
    return _STOPPED_EXIT.get(reason, EXIT_OK)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from rlflow.checkpoint import latest_checkpoint, load_checkpoint
    from rlflow.cli.watch import check_watch_flags, evaluation_creator
    from rlflow.trainer import Trainer

    if args.episodes < 1:
        raise ConfigError(f"--episodes {args.episodes}: must be >= 1")
    storage.probe(args.checkpoint, "CHECKPOINT")
    check_watch_flags(render=args.render, video_dir=args.video)
    state = load_checkpoint(latest_checkpoint(args.checkpoint))  # a run dir: its latest
    with Trainer.restore(state, backend="local") as trainer:
        creator = evaluation_creator(
            trainer.config, render=args.render, video_dir=args.video, num_episodes=args.episodes
        )
        stats = trainer.evaluate(
            args.episodes, seed=args.seed, explore=args.stochastic, env_creator=creator
        )
    mode = "stochastic" if args.stochastic else "greedy"
    what = f"{trainer.algorithm} on {trainer.config.env}, iteration {trainer.iteration}"
    if "self_play" in stats:  # a zero-sum game: its mean return is 0, its results are these
        sys.stdout.write(evaluation_games(what, stats, mode))
    elif (seats := seat_outcomes(stats)) is not None:  # a zero-sum game without self-play
        sys.stdout.write(f"{what}: {stats['episodes']} {mode} episodes, {seats}\n")
    else:
        teams = stats.get("team_return_mean") or {}
        team_returns = "".join(f", team {t} return mean {v:.2f}" for t, v in teams.items())
        sys.stdout.write(
            f"{what}: {stats['episodes']} {mode} episodes{team_returns}, return mean "
            f"{stats['episode_return_mean']:.2f} (min {stats['episode_return_min']:.2f}, max "
            f"{stats['episode_return_max']:.2f}), length mean {stats['episode_len_mean']:.1f}\n"
        )
    if args.video:
        videos = sorted(Path(args.video).glob("*.mp4"))
        sys.stdout.write(f"videos: {len(videos)} in {args.video}\n")
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    from rlflow.checkpoint import latest_checkpoint, load_checkpoint
    from rlflow.export.files import upload_export
    from rlflow.trainer import Trainer

    storage.probe(args.checkpoint, "CHECKPOINT_OR_RUN_DIR")
    storage.probe(args.output, "--output")
    state = load_checkpoint(latest_checkpoint(args.checkpoint))  # a run dir: its latest
    with Trainer.restore(state, backend="local") as trainer:
        if storage.is_remote(args.output):  # written here, then uploaded (its spec last)
            onnx_paths: list[str] = []

            def write_local(local: Path) -> str:
                written = trainer.export_policy(local, policy_id=args.policy_id)
                onnx_paths.extend(_export_onnx(args, written))
                return written

            path = upload_export(args.output, write_local, "--output")
        else:
            path = trainer.export_policy(args.output, policy_id=args.policy_id)
            onnx_paths = _export_onnx(args, path)
    members = _team_members(path)
    load = (
        "one policy per member: "
        + ", ".join(f"rlflow.load_policy({storage.join(path, m)!r})" for m in members)
        if members
        else f"load it with rlflow.load_policy({path!r})"
    )
    sys.stdout.write(
        f"exported {args.policy_id} of {trainer.algorithm} on {trainer.config.env} "
        f"(iteration {trainer.iteration}) to {path}; {load}\n"
    )
    for relative in onnx_paths:  # a team: one ONNX file per member
        sys.stdout.write(
            f"ONNX: {storage.join(path, relative)} (inputs and outputs: rlflow.export.onnx; run "
            "it with onnxruntime.InferenceSession)\n"
        )
    return EXIT_OK


def _team_members(path: str) -> list[str]:
    """The members of the team export at ``path`` (from its ``team.json``); [] for a policy's
    export."""
    from rlflow.export.files import TEAM_FILE

    team_file = storage.join(path, TEAM_FILE)
    if not storage.is_file(team_file):
        return []
    members = json.loads(storage.read_text(team_file)).get("members", [])
    return [str(m) for m in members]


def _export_onnx(args: argparse.Namespace, path: str) -> list[str]:
    """With ``--format onnx``: write the local export ``path``'s ONNX file beside it (a team's
    export: one in each member's directory); return their paths relative to ``path``."""
    if args.format != "onnx":
        return []
    from rlflow.export.files import SPEC_FILE, TEAM_FILE
    from rlflow.export.onnx import ONNX_FILE, export_onnx

    root = Path(path)
    members = (
        sorted(p for p in root.iterdir() if (p / SPEC_FILE).is_file())
        if (root / TEAM_FILE).is_file()
        else [root]
    )
    return [
        Path(export_onnx(member, member / ONNX_FILE)).relative_to(root).as_posix()
        for member in members
    ]


def _cmd_plan(args: argparse.Namespace) -> int:
    from rlflow.cli.dataflow import RunDataflow, format_table
    from rlflow.cli.plan_html import write_html
    from rlflow.trainer import Trainer

    remote = storage.is_remote(args.algo) if "://" in args.algo else False
    if remote or Path(args.algo).is_dir():  # a run dir: its saved graph with measured stages
        measured = _load_dataflow(args.algo, remote=remote)
        sys.stdout.write(format_table(measured) + "\n")
        if args.html:
            sys.stdout.write(f"wrote {write_html(measured, args.html)}\n")
        return EXIT_OK
    run = resolve_run(args)
    with Trainer(run.setup, backend="local") as trainer:
        graph = trainer.plan_graph()
    sys.stdout.write(graph.to_mermaid() + "\n")
    if args.html:
        bare = RunDataflow.unmeasured(graph, run.algo, str(run.config.env))
        sys.stdout.write(f"wrote {write_html(bare, args.html)}\n")
    return EXIT_OK


def _load_dataflow(run_dir: str, *, remote: bool) -> Any:
    """`rlflow.cli.dataflow.load_dataflow` of a local run dir, or of a copy of the files it
    reads from one in object storage."""
    from rlflow.cli.dataflow import load_dataflow

    if not remote:
        return load_dataflow(run_dir)
    storage.probe(run_dir, "RUN_DIR")
    with tempfile.TemporaryDirectory(prefix="rlflow-plan-") as tmp:
        local = Path(tmp) / storage.name_of(run_dir)
        local.mkdir()
        for name in ("plan.json", "progress.jsonl", "config.yaml"):
            if storage.is_file(storage.join(run_dir, name)):
                storage.download_file(storage.join(run_dir, name), local / name)
        try:
            return load_dataflow(local)
        except ConfigError as err:
            raise ConfigError(str(err).replace(str(local), run_dir.rstrip("/"))) from None


def _cmd_list(args: argparse.Namespace) -> int:
    from rlflow.algorithms import ALGORITHMS

    specs = ALGORITHMS
    width = max((len(name) for name in specs), default=0)
    for name in sorted(specs):
        envs, gpu = tuned_envs(name), tuned_envs(name, "gpu")
        tuned = f"  [tuned: {', '.join(envs)}]" if envs else ""
        tuned += f"  [--tuned-for gpu: {', '.join(gpu)}]" if gpu else ""
        sys.stdout.write(f"{name:<{width}}  {specs[name].summary}{tuned}\n")
    return EXIT_OK


def _cmd_plot(args: argparse.Namespace) -> int:
    from rlflow.cli.plot import plot_runs

    path = plot_runs(args.run_dirs, x=args.x, y=args.y, out=args.output, labels=args.label)
    sys.stdout.write(f"wrote {path}\n")
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "train": _cmd_train,
    "serve": _cmd_serve,
    "evaluate": _cmd_evaluate,
    "plan": _cmd_plan,
    "list": _cmd_list,
    "plot": _cmd_plot,
    "export": _cmd_export,
}
"""Sub-command name -> handler (parsed arguments -> exit status)."""

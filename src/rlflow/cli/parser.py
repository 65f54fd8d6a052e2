"""The argument parser of the ``rlflow`` command line (sub-commands and their flags)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from rlflow.config.files import TUNED_HARDWARE
from rlflow.version import __version__

__all__ = ["Parser", "UsageError", "build_parser"]


class UsageError(Exception):
    """Bad command-line input: printed as ``rlflow: error: ...``, exit status 2."""


class Parser(argparse.ArgumentParser):
    """An argument parser that raises `UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        """Raise `UsageError` with ``message``, prefixed by the sub-command."""
        command = self.prog.removeprefix("rlflow").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def _config_args() -> Parser:
    """The flags that build a config, shared by ``train`` and ``plan``."""
    config_args = Parser(add_help=False)
    config_args.add_argument(
        "--env",
        help="Gymnasium env id, or the dotted name of a module with PettingZoo's "
        "parallel_env()/env() (pettingzoo.classic.rps_v2, mpe2.simple_spread_v3, your own; "
        "env_config are its kwargs) (default: the config's)",
    )
    config_args.add_argument("--num-workers", type=int, help="remote rollout workers")
    config_args.add_argument("--seed", type=int, help="seed of envs and policies")
    config_args.add_argument("--config", metavar="FILE.yaml", help="YAML config file")
    config_args.add_argument(
        "--tuned",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="apply the shipped tuned config for ALGO+ENV, if one exists (default: on)",
    )
    config_args.add_argument(
        "--tuned-for",
        choices=TUNED_HARDWARE,
        default="cpu",
        help="which shipped tuned config: cpu (sized for a 2-core machine) or gpu (a GPU "
        "learner and 16 cores: tuned/gpu/ENV.yaml; none ships for ALGO+ENV is an error) "
        "(default: cpu)",
    )
    config_args.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="set a config field (YAML value); KEY.SUBKEY sets one key of a dict field, e.g. "
        "model.hidden=[32,32]",
    )
    return config_args


def _run_args() -> Parser:
    """The flags of a training run, shared by ``train`` and ``serve``: stop criteria, run dir,
    backend, checkpoints, loggers."""
    run = Parser(add_help=False)
    run.add_argument(
        "--stop-reward",
        type=float,
        help="stop at this episode_return_mean (bc, marwil: the evaluation's)",
    )
    run.add_argument(
        "--output",
        metavar="DIR",
        help="also write every sampled batch to DIR (a path or s3://, gs://, file:// URI) as "
        "Parquet files (config output; train bc or marwil on them with --set input=DIR)",
    )
    run.add_argument(
        "--stop-policy-reward",
        type=float,
        help="multi-agent: stop once every policy's policy_reward_mean reaches this",
    )
    run.add_argument(
        "--stop-win-rate",
        type=float,
        help="self-play games: stop once the win_rate against a random legal player (the "
        "lowest learner's, at its latest measurement) reaches this, in (0, 1]",
    )
    run.add_argument(
        "--stop-timesteps",
        type=int,
        help="stop after this many env steps (a run reading recorded experience only: rows "
        "trained)",
    )
    run.add_argument("--stop-time", type=float, help="stop after this many seconds")
    run.add_argument("--stop-iters", type=int, help="stop after this many iterations")
    run.add_argument(
        "--out",
        metavar="DIR",
        help="run dir: a path or an s3://, gs://, file:// URI (object storage: checkpoints "
        "uploaded as written, logs synced at each checkpoint; default runs/<algo>_<env>_<time>)",
    )
    run.add_argument("--address", help="Ray cluster address (backend ray)")
    run.add_argument(
        "--ray-init-timeout",
        type=float,
        default=15.0,
        metavar="S",
        help="seconds to try to reach --address HOST:PORT before giving up (default 15)",
    )
    run.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        metavar="N",
        help="checkpoint every N iters (default 0: only when the run stops)",
    )
    run.add_argument(
        "--logger",
        metavar="NAMES",
        help="comma list of result loggers: jsonl, csv, tensorboard, wandb, mlflow "
        "(default: jsonl,csv,tensorboard; sets the config field loggers)",
    )
    return run


def _add_train(
    sub: argparse._SubParsersAction[Parser], config_args: Parser, run_args: Parser
) -> None:
    train = sub.add_parser(
        "train",
        parents=[config_args, run_args],
        help="train an algorithm",
        description="Train ALGO until the stop criteria. Ctrl-C (exit status 130) or SIGTERM "
        "(143) stops it the same way: a final checkpoint, the actors and the Ray it started "
        "stopped; a second one during that stop exits at once.",
    )
    train.add_argument("algo", metavar="ALGO", nargs="?", help="(optional with --restore)")
    train.add_argument("--backend", choices=["ray", "local"], default="ray")
    train.add_argument(
        "--restore",
        metavar="CHECKPOINT_OR_RUN_DIR",
        help="continue a run from a checkpoint (a run dir: its latest complete one; a path or an "
        "s3://, gs://, file:// URI) in its run dir, with its config (flags override; no tuned "
        "config); stop criteria count over the whole run. A checkpoint is code: it is unpickled "
        "with cloudpickle, and loading one runs what it holds; only restore checkpoints you "
        "trust (exports of rlflow export hold tensors only)",
    )


def _add_serve(
    sub: argparse._SubParsersAction[Parser], config_args: Parser, run_args: Parser
) -> None:
    serve = sub.add_parser(
        "serve",
        parents=[config_args, run_args],
        help="train an algorithm on the episodes of external simulators (PolicyClient)",
        description="Listen for external simulators (rlflow.serve.PolicyClient, or any HTTP "
        "client of the JSON protocol in rlflow.serve.server) and train ALGO on their episodes "
        "until the stop criteria, the weights they act with updated as it learns. The spaces "
        "are --env's (built once, never stepped) or --spaces FILE.json's. Ctrl-C or SIGTERM "
        "stops it as it stops train.",
    )
    serve.add_argument("algo", metavar="ALGO")
    serve.add_argument(
        "--spaces",
        metavar="FILE.json",
        help='{"observation_space": SPACE, "action_space": SPACE}, each as rlflow.export '
        'writes spaces (e.g. {"type": "Discrete", "n": 2}) (default: --env\'s)',
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface (default 127.0.0.1); any but a loopback address needs --auth-token",
    )
    serve.add_argument("--port", type=int, default=9900, help="port (default 9900; 0: any)")
    serve.add_argument(
        "--concurrent-episodes",
        type=int,
        default=1,
        metavar="N",
        help="episodes stepped together (num_envs_per_worker): the clients that run at once "
        "(default 1; each step waits for all N)",
    )
    serve.add_argument(
        "--episode-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="end an episode without a request for S seconds (default 60)",
    )
    serve.add_argument(
        "--auth-token",
        metavar="TOKEN",
        help="every request must carry 'Authorization: Bearer TOKEN' (401 otherwise); "
        "required unless --host is a loopback address (default: the environment variable "
        "RLFLOW_SERVE_TOKEN, which unlike this flag other users cannot list)",
    )
    serve.add_argument(
        "--tls-cert",
        metavar="CERT.pem",
        help="serve HTTPS with this PEM certificate chain (clients: https://HOST:PORT)",
    )
    serve.add_argument(
        "--tls-key", metavar="KEY.pem", help="the private key of --tls-cert (default: in its file)"
    )
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        default=2**20,
        metavar="N",
        help="a request body over N bytes gets 413 (default 1048576: 1 MiB)",
    )
    serve.add_argument("--backend", choices=["ray", "local"], default="local")
    serve.set_defaults(restore=None)


def _add_plot(sub: argparse._SubParsersAction[Parser]) -> None:
    plot = sub.add_parser(
        "plot",
        help="learning curves of run dirs (needs matplotlib)",
        description="Learning curves from progress.csv (or progress.jsonl); runs with the same "
        "label (default: algorithm and env of their config.yaml, e.g. seeds) are drawn as the "
        "mean with a min/max band.",
    )
    plot.add_argument(
        "run_dirs", metavar="RUN_DIR", nargs="+", help="run dirs to plot (paths or storage URIs)"
    )
    plot.add_argument("--x", default="num_env_steps_sampled", help="x column (nested: a/b)")
    plot.add_argument("--y", default="episode_return_mean", help="y column (nested: a/b)")
    plot.add_argument("-o", "--output", default="plot.png", metavar="FILE", help="image file")
    plot.add_argument(
        "--label",
        action="append",
        metavar="LABEL",
        help="label of each RUN_DIR, in order (give one per run dir)",
    )


def _add_export(sub: argparse._SubParsersAction[Parser]) -> None:
    export = sub.add_parser(
        "export",
        help="write a checkpoint's policy for rlflow.load_policy (no Ray needed to load it)",
    )
    export.add_argument(
        "checkpoint",
        metavar="CHECKPOINT_OR_RUN_DIR",
        help="a run dir: its latest (path or URI). A checkpoint is unpickled with cloudpickle "
        "(loading runs code): only trusted ones; the export written holds JSON and tensors only",
    )
    export.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="directory to write (a path or an s3://, gs://, file:// URI)",
    )
    export.add_argument("--policy-id", default="default_policy", help="the policy to export")
    export.add_argument(
        "--format",
        choices=["rlflow", "onnx"],
        default="rlflow",
        help="onnx: also write DIR/policy.onnx, the greedy policy with its observation filter "
        "folded in, for onnxruntime (pip install rl-flow[onnx]) (default: rlflow)",
    )


def _add_evaluate(sub: argparse._SubParsersAction[Parser]) -> None:
    evaluate = sub.add_parser(
        "evaluate", help="play episodes with a checkpoint's policies; watch or record them"
    )
    evaluate.add_argument(
        "checkpoint",
        metavar="CHECKPOINT",
        help="checkpoint or run dir (a path or storage URI; unpickled with cloudpickle: loading "
        "runs code, only trusted ones)",
    )
    evaluate.add_argument("--episodes", type=int, default=10, metavar="N", help="episodes")
    evaluate.add_argument(
        "--seed", type=int, help="seed of the env's first reset (default: the run's seed + 1000003)"
    )
    evaluate.add_argument(
        "--stochastic", action="store_true", help="sample actions (default: greedy ones)"
    )
    evaluate.add_argument("--render", action="store_true", help="show the episodes in a window")
    evaluate.add_argument(
        "--video",
        metavar="DIR",
        help='write one .mp4 per episode to DIR (needs moviepy: pip install "rl-flow[video]")',
    )


def build_parser() -> Parser:
    """The ``rlflow`` parser: ``train``, ``serve``, ``evaluate``, ``plan``, ``list``, ``plot``
    and ``export``; ``--version``."""
    parser = Parser(prog="rlflow", description="Distributed RL as dataflow.")
    parser.add_argument("--version", action="version", version=f"rlflow {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="INFO logs on stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    config_args, run_args = _config_args(), _run_args()
    _add_train(sub, config_args, run_args)
    _add_serve(sub, config_args, run_args)

    _add_evaluate(sub)

    plan = sub.add_parser(
        "plan",
        parents=[config_args],
        help="print a plan's Mermaid graph (ALGO), or a run's measured stages (RUN_DIR)",
    )
    plan.add_argument(
        "algo",
        metavar="ALGO_OR_RUN_DIR",
        help="an algorithm, or a run dir (a path or storage URI: its saved plan.json)",
    )
    plan.add_argument(
        "--html",
        metavar="FILE",
        help="write the graph as a self-contained HTML page; for a run dir, each stage with its "
        "items/s and share of time, the bottleneck outlined",
    )

    sub.add_parser("list", help="list algorithms and shipped tuned configs")
    _add_plot(sub)
    _add_export(sub)
    return parser

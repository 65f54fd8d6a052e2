"""The ``rlflow`` command line: train, evaluate, show a plan, list algorithms.

::

    rlflow train ppo --env CartPole-v1 --num-workers 2 --stop-reward 450
    rlflow evaluate runs/ppo_CartPole-v1_20250101-120000/checkpoint_000010 --episodes 20
    rlflow plan a3c --env CartPole-v1
    rlflow list

The config of ``train`` is layered, later wins: the algorithm's defaults, the tuned config
shipped for ALGO+ENV (``--tuned``, on by default), ``--config FILE.yaml``, the flags
(``--env``, ``--num-workers``, ``--seed``), then ``--set key=value``. A config file is either a
mapping of config fields, or a mapping with ``config:`` (fields), ``stop:`` (result key ->
threshold) and optionally ``env:``. Bad input prints one ``rlflow: error: ...`` line and exits
with status 2 before any actor starts.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import math
import re
import sys
import time
import types
import typing
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import IO, Any, NamedTuple, NoReturn

from rlflow.errors import ConfigError, RLFlowError

__all__ = ["ConfigFile", "load_config_file", "main", "tuned_config_path", "tuned_envs"]

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

STOP_ALIASES = {
    "episode_reward_mean": "episode_return_mean",
    "timesteps_total": "num_env_steps_sampled",
    "training_iteration": "iteration",
}
"""RLlib/Tune stop keys accepted in config files, and the result keys they mean."""

_FILE_KEYS = ("config", "stop", "env", "algorithm", "run")


class _UsageError(Exception):
    """Bad command-line input: printed as ``rlflow: error: ...``, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("rlflow").strip()
        raise _UsageError(f"{command}: {message}" if command else message)


class ConfigFile(NamedTuple):
    """What a YAML config file holds."""

    fields: dict[str, Any]
    """Config fields (validated later against the algorithm's config class)."""
    stop: dict[str, float]
    """Stop criteria: result key -> threshold (stop when ``result[key] >= threshold``)."""


def load_config_file(path: str | Path) -> ConfigFile:
    """Read a YAML config file (see the module docstring); :class:`ConfigError` if malformed."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read config file {str(path)!r}: {err}") from None
    if data is None:
        return ConfigFile({}, {})
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping, not a list or scalar")
    if "config" not in data:
        return ConfigFile(dict(data), {})
    unknown = sorted(set(data) - set(_FILE_KEYS))
    if unknown or not isinstance(data["config"], dict):
        raise ConfigError(
            f"config file {str(path)!r}: with a 'config:' section the top-level keys must be "
            f"among {list(_FILE_KEYS)} and 'config' a mapping (got keys {sorted(data)})"
        )
    fields = dict(data["config"])
    if "env" in data:
        fields.setdefault("env", data["env"])
    stop = data.get("stop") or {}
    if not isinstance(stop, dict) or not all(_is_number(v) for v in stop.values()):
        raise ConfigError(f"config file {str(path)!r}: 'stop' must map result keys to numbers")
    return ConfigFile(fields, {STOP_ALIASES.get(str(k), str(k)): float(v) for k, v in stop.items()})


def _tuned_dir(algo: str) -> Any:
    return resources.files("rlflow").joinpath("algorithms", algo, "tuned")


def tuned_envs(algo: str) -> list[str]:
    """Env ids for which a tuned config of ``algo`` ships (sorted; file names, "-" for "/")."""
    folder = _tuned_dir(algo)
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def tuned_config_path(algo: str, env: str) -> Path | None:
    """The shipped tuned config file of ``algo`` on ``env``, or None if none ships.

    A namespaced id has its "/" written "-" in the file name (``ALE/Pong-v5`` ->
    ``ALE-Pong-v5.yaml``), as in `rlflow.algorithms.tuned_config`.
    """
    if not re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", env):
        return None  # "module:Id" ids have no tuned file name
    path = _tuned_dir(algo).joinpath(f"{env.replace('/', '-')}.yaml")
    return Path(str(path)) if path.is_file() else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fix_value(config_cls: Any, key: str, value: Any) -> Any:
    """Make YAML's quirks fit the field type: ``1e-3`` (a str in YAML 1.1) and ints -> float."""
    if key not in config_cls.field_names():
        return value
    hint = config_cls.field_type(key)
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if float not in allowed or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return float(value)
    return value


def _default(config_cls: Any, name: str) -> Any:
    """The default of field ``name`` of a config dataclass (None if it has none)."""
    for f in dataclasses.fields(config_cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return None


# ------------------------------------------------------------------------------ parsing
def _build_parser() -> _Parser:
    parser = _Parser(prog="rlflow", description="Distributed RL as dataflow.")
    parser.add_argument("-v", "--verbose", action="store_true", help="INFO logs on stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    config_args = _Parser(add_help=False)
    config_args.add_argument("--env", help="Gymnasium env id (default: the config's)")
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
        "--set", metavar="KEY=VALUE", action="append", default=[], help="set a config field"
    )

    train = sub.add_parser("train", parents=[config_args], help="train an algorithm")
    train.add_argument("algo", metavar="ALGO")
    train.add_argument("--stop-reward", type=float, help="stop at this episode_return_mean")
    train.add_argument(
        "--stop-policy-reward",
        type=float,
        help="multi-agent: stop once every policy's policy_reward_mean reaches this",
    )
    train.add_argument("--stop-timesteps", type=int, help="stop after this many env steps")
    train.add_argument("--stop-time", type=float, help="stop after this many seconds")
    train.add_argument("--stop-iters", type=int, help="stop after this many iterations")
    train.add_argument("--out", metavar="DIR", help="run dir (default runs/<algo>_<env>_<time>)")
    train.add_argument("--backend", choices=["ray", "local"], default="ray")
    train.add_argument("--address", help="Ray cluster address (backend ray)")
    train.add_argument(
        "--checkpoint-every", type=int, default=0, metavar="N", help="checkpoint every N iters"
    )

    evaluate = sub.add_parser("evaluate", help="evaluate a checkpoint with greedy actions")
    evaluate.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint or run dir")
    evaluate.add_argument("--episodes", type=int, default=10)

    plan = sub.add_parser("plan", parents=[config_args], help="print a plan's Mermaid graph")
    plan.add_argument("algo", metavar="ALGO")

    sub.add_parser("list", help="list algorithms and shipped tuned configs")
    return parser


class _RunSpec(NamedTuple):
    algo: str
    config: Any  # the validated AlgorithmConfig
    stop: dict[str, float]


def _resolve(args: argparse.Namespace) -> _RunSpec:
    """Algorithm, layered config and stop criteria; raises ConfigError on any bad input."""
    from rlflow.algorithms import get_algorithm
    from rlflow.trainer import check_env

    spec = get_algorithm(args.algo)
    config_cls = spec.config_cls
    file = load_config_file(args.config) if args.config else ConfigFile({}, {})
    env = args.env or file.fields.get("env") or _default(config_cls, "env")
    fields: dict[str, Any] = {}
    stop: dict[str, float] = {}
    if args.tuned and isinstance(env, str) and (path := tuned_config_path(spec.name, env)):
        tuned = load_config_file(path)
        logger.info("applying tuned config %s", path)
        fields.update(tuned.fields)
        stop.update(tuned.stop)
    fields.update(file.fields)
    stop.update(file.stop)
    flags = {"env": args.env, "num_workers": args.num_workers, "seed": args.seed}
    fields.update({k: v for k, v in flags.items() if v is not None})
    fields.update(_parse_sets(config_cls, args.set))
    fields = {k: _fix_value(config_cls, k, v) for k, v in fields.items()}
    config = config_cls.from_dict(fields)
    check_env(config)
    return _RunSpec(spec.name, config, stop)


def _parse_sets(config_cls: Any, items: Sequence[str]) -> dict[str, Any]:
    from rlflow.config import coerce_value

    values = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set lr=0.001")
        values[key.strip()] = coerce_value(config_cls, key.strip(), text)
    return values


def _stop_criteria(args: argparse.Namespace, base: Mapping[str, float]) -> dict[str, float]:
    stop = dict(base)
    flags = {
        "episode_return_mean": args.stop_reward,
        "policy_reward_mean": args.stop_policy_reward,
        "num_env_steps_sampled": args.stop_timesteps,
        "time_total_s": args.stop_time,
        "iteration": args.stop_iters,
    }
    for key, value in flags.items():
        if value is not None:
            if key not in ("episode_return_mean", "policy_reward_mean") and value <= 0:
                raise ConfigError(f"--stop-{key}: {value!r} must be > 0")
            stop[key] = float(value)
    return stop


def _should_stop(result: Mapping[str, Any], stop: Mapping[str, float]) -> str | None:
    for key, threshold in stop.items():
        value: Any = result.get(key)
        if isinstance(value, Mapping):  # per policy: every policy must reach the threshold
            value = min(value.values()) if value else None
        if _is_number(value) and not math.isnan(value) and value >= threshold:
            return f"{key}={value:g} >= {threshold:g}"
    return None


# ------------------------------------------------------------------------------ output
def _jsonable(value: Any) -> Any:
    """A JSON-safe copy: numpy scalars/arrays to Python, NaN/inf to None, others to str."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist):
        return _jsonable(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int | str):
        return value
    return getattr(value, "__qualname__", None) or repr(value)


def _fmt(value: Any, spec: str) -> str:
    """``format(value, spec)``, or a dash of the same width for None/NaN."""
    if not _is_number(value) or math.isnan(value):
        return "-".rjust(int(spec.split(".")[0] or 0))
    return format(value, spec)


def _progress_line(result: Mapping[str, Any]) -> str:
    line = (
        f"iter {result['iteration']:4d} | return {_fmt(result['episode_return_mean'], '8.2f')} | "
        f"env steps {result['num_env_steps_sampled']:9d} | "
        f"{_fmt(result.get('env_steps_per_s'), '8.0f')} steps/s | "
        f"{result['time_total_s']:7.1f} s"
    )
    per_policy = result.get("policy_reward_mean")
    if isinstance(per_policy, Mapping) and per_policy:
        line += " | " + " ".join(f"{pid} {_fmt(v, '.1f')}" for pid, v in per_policy.items())
    return line


def _make_run_dir(out: str | None, algo: str, env: Any) -> Path:
    if out:
        path = Path(out)
    else:
        env_name = re.sub(r"[^\w.\-]+", "-", env if isinstance(env, str) else "env")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = Path("runs") / f"{algo}_{env_name}_{stamp}"
        n = 1
        while path.exists():
            n += 1
            path = Path("runs") / f"{algo}_{env_name}_{stamp}_{n}"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"--out {str(path)!r}: cannot create the run dir ({err})") from None
    return path


def _start_backend(name: str, address: str | None, verbose: bool) -> bool:
    """Start the flow backend for a CLI run (quiet Ray unless -v); True if started here."""
    from rlflow import flow

    if flow.is_initialized() and flow.backend_name() == name:
        return False
    kwargs: dict[str, Any] = {}
    if name == "ray":
        kwargs["logging_level"] = logging.INFO if verbose else logging.WARNING
        if address:
            kwargs["address"] = address
    flow.init(name, **kwargs)
    return True


# ------------------------------------------------------------------------------ commands
def _cmd_train(args: argparse.Namespace) -> int:
    from rlflow import flow
    from rlflow.trainer import Trainer

    run = _resolve(args)
    stop = _stop_criteria(args, run.stop)
    if args.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every {args.checkpoint_every}: must be >= 0")
    if args.address and args.backend == "local":
        raise ConfigError(f"--address {args.address!r} needs --backend ray")
    run_dir = _make_run_dir(args.out, run.algo, run.config.env)
    _write_yaml(
        run_dir / "config.yaml",
        {"algorithm": run.algo, "config": run.config.to_dict(), "stop": stop},
    )
    started = _start_backend(args.backend, args.address, args.verbose)
    try:
        with Trainer(run.algo, backend=args.backend, **run.config.to_dict()) as trainer:
            return _train_loop(trainer, run_dir, stop, args.checkpoint_every)
    finally:
        if started:
            flow.shutdown()


def _train_loop(trainer: Any, run_dir: Path, stop: Mapping[str, float], every: int) -> int:
    out = sys.stdout
    crit = ", ".join(f"{k} >= {v:g}" for k, v in stop.items()) or "none (Ctrl-C to stop)"
    out.write(f"training {trainer.algorithm} on {trainer.config.env} -> {run_dir}; stop: {crit}\n")
    result: dict[str, Any] | None = None
    saved_at = -1
    reason = "interrupted"
    try:
        with (run_dir / "progress.jsonl").open("w") as progress:
            while True:
                result = trainer.train()
                progress.write(json.dumps(_jsonable(result), allow_nan=False) + "\n")
                progress.flush()
                out.write(_progress_line(result) + "\n")
                out.flush()
                if every and result["iteration"] % every == 0:
                    trainer.save(run_dir / f"checkpoint_{result['iteration']:06d}")
                    saved_at = result["iteration"]
                if (why := _should_stop(result, stop)) is not None:
                    reason = why
                    break
    except KeyboardInterrupt:
        out.write("\ninterrupted: saving a checkpoint\n")
    checkpoint = run_dir / f"checkpoint_{trainer.iteration:06d}"
    if trainer.iteration != saved_at:
        trainer.save(checkpoint)
    if result is not None:
        (run_dir / "result.json").write_text(json.dumps(_jsonable(result), indent=2) + "\n")
    _summary(out, trainer, result, reason, checkpoint, run_dir)
    return EXIT_INTERRUPTED if reason == "interrupted" else EXIT_OK


def _summary(
    out: IO[str], trainer: Any, result: Mapping[str, Any] | None, reason: str, ckpt: Path, d: Path
) -> None:
    ret = _fmt(result["episode_return_mean"], ".2f") if result else "nan"
    steps = result["num_env_steps_sampled"] if result else 0
    elapsed = result["time_total_s"] if result else 0.0
    out.write(
        f"done ({reason}): {trainer.iteration} iterations, {steps} env steps in {elapsed:.1f} s, "
        f"episode_return_mean {ret}\ncheckpoint: {ckpt}\nresults: {d}\n"
    )


def _write_yaml(path: Path, data: Mapping[str, Any]) -> None:
    import yaml

    path.write_text(yaml.safe_dump(_jsonable(data), sort_keys=False))


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from rlflow.trainer import Trainer, load_checkpoint

    if args.episodes < 1:
        raise ConfigError(f"--episodes {args.episodes}: must be >= 1")
    path = Path(args.checkpoint)
    latest = sorted(path.glob("checkpoint_*")) if path.is_dir() else []
    path = latest[-1] if latest else path  # a run dir: its latest checkpoint
    load_checkpoint(path)  # a clear error before anything starts
    with Trainer.restore(path, backend="local") as trainer:
        stats = trainer.evaluate(num_episodes=args.episodes)
    sys.stdout.write(
        f"{trainer.algorithm} on {trainer.config.env}, iteration {trainer.iteration}: "
        f"{stats['episodes']} greedy episodes, return mean {stats['episode_return_mean']:.2f} "
        f"(min {stats['episode_return_min']:.2f}, max {stats['episode_return_max']:.2f}), "
        f"length mean {stats['episode_len_mean']:.1f}\n"
    )
    return EXIT_OK


def _cmd_plan(args: argparse.Namespace) -> int:
    from rlflow.trainer import Trainer

    run = _resolve(args)
    with Trainer(run.algo, backend="local", **run.config.to_dict()) as trainer:
        sys.stdout.write(trainer.plan_graph().to_mermaid() + "\n")
    return EXIT_OK


def _cmd_list(args: argparse.Namespace) -> int:
    from rlflow.algorithms import ALGORITHMS

    specs = ALGORITHMS
    width = max((len(name) for name in specs), default=0)
    for name in sorted(specs):
        envs = tuned_envs(name)
        tuned = f"  [tuned: {', '.join(envs)}]" if envs else ""
        sys.stdout.write(f"{name:<{width}}  {specs[name].summary}{tuned}\n")
    return EXIT_OK


_COMMANDS = {"train": _cmd_train, "evaluate": _cmd_evaluate, "plan": _cmd_plan, "list": _cmd_list}


def _error(message: str) -> int:
    sys.stderr.write(f"rlflow: error: {message}\n")
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``rlflow`` command line; return the exit status (2 for bad input)."""
    try:
        args = _build_parser().parse_args(argv)
    except _UsageError as err:
        return _error(str(err))
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    handler: logging.Handler | None = None
    log = logging.getLogger("rlflow")
    level = log.level
    if args.verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    try:
        return _COMMANDS[args.command](args)
    except ConfigError as err:
        return _error(" ".join(str(err).split("\n")))
    except RLFlowError as err:
        notes = "".join(f"\n  {note}" for note in getattr(err, "__notes__", ()))
        sys.stderr.write(f"rlflow: error: {type(err).__name__}: {err}{notes}\n")
        return 1
    finally:
        if handler is not None:
            log.removeHandler(handler)
            log.setLevel(level)


if __name__ == "__main__":
    sys.exit(main())

"""``Trainer``: the one imperative loop that drives a plan.

A plan (``plan(workers, config) -> LocalIterator[dict]``) is built **once**; each
:meth:`Trainer.train` pulls one result from it (paper §4; RLlib 1.x ``Trainer._train``). The
plan's shared :class:`~rlflow.flow.MetricsContext` is owned by the trainer and injected into the
plan, so counters (env steps sampled/trained, ...) live on the trainer and survive checkpoints
(the fix for ray-project/ray#23652 / #29553)::

    with rlflow.Trainer("ppo", env="CartPole-v1", num_workers=2, seed=0) as trainer:
        for _ in range(10):
            result = trainer.train()
        path = trainer.save("ckpt")
    trainer = rlflow.Trainer.restore("ckpt", backend="local")

Tuned defaults (``algorithms/<algo>/tuned/<EnvId>.yaml``) are **not** applied implicitly in the
Python API: the config is the algorithm's defaults plus the fields you pass. The CLI applies them
(``rlflow train --tuned``); in Python pass them yourself:
``Trainer("ppo", **rlflow.algorithms.tuned_config("ppo", "CartPole-v1").to_dict())``.
"""

from __future__ import annotations

import json
import logging
import pickle
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import numpy as np

from rlflow import flow
from rlflow.config import AlgorithmConfig
from rlflow.errors import ConfigError, PlanError, RLFlowError
from rlflow.flow import LocalIterator, MetricsContext, PlanGraph
from rlflow.flow.backend import BACKENDS
from rlflow.ops.keys import NUM_ENV_STEPS_SAMPLED, NUM_ENV_STEPS_TRAINED

__all__ = ["CHECKPOINT_META", "CHECKPOINT_STATE", "RESULT_KEYS", "Trainer"]

logger = logging.getLogger(__name__)

PlanFn = Callable[[Any, Any], LocalIterator[dict[str, Any]]]
"""A plan: ``plan(workers, config) -> LocalIterator[dict]`` yielding one result per iteration."""

CHECKPOINT_STATE = "trainer_state.pkl"
"""File (in a checkpoint directory) holding the pickled trainer state."""
CHECKPOINT_META = "rlflow_checkpoint.json"
"""File (in a checkpoint directory) holding small human-readable metadata."""
_FORMAT = "rlflow-checkpoint"
_VERSION = 1

RESULT_KEYS = (
    "iteration",
    "episode_return_mean",
    "episode_len_mean",
    "episodes_total",
    "num_env_steps_sampled",
    "num_env_steps_trained",
    "time_total_s",
)
"""Keys every :meth:`Trainer.train` result has (return/length are None before any episode)."""

_SAMPLED = NUM_ENV_STEPS_SAMPLED  # counter key == result key
_TRAINED = NUM_ENV_STEPS_TRAINED
_UNSET: Any = object()


def _get_spec(algo: str) -> Any:
    """The registered :class:`~rlflow.algorithms.AlgorithmSpec` of ``algo`` (ConfigError)."""
    from rlflow.algorithms import get_algorithm

    return get_algorithm(algo)


def _make_workers(config: AlgorithmConfig, policy_cls: type) -> Any:
    """Build the :class:`~rlflow.workers.WorkerSet` of a run (starts the actors)."""
    from rlflow.workers import WorkerSet

    return WorkerSet(config, policy_cls)


def check_env(config: AlgorithmConfig) -> None:
    """Raise :class:`ConfigError` if ``config.env`` is an unknown Gymnasium id (builds no env)."""
    from rlflow.envs import make_env_creator

    make_env_creator(config.env, **config.env_config)


# --------------------------------------------------------------------------- backend lease
# The trainer layer shuts down only a backend it started; trainers that reuse it share it.
_lease_backend: str | None = None
_lease_users = 0


def _acquire_backend(backend: str | None, address: str | None) -> bool:
    """Make sure the wanted backend runs; True if this trainer holds a share of it."""
    global _lease_backend, _lease_users
    if backend not in (None, *BACKENDS):
        raise ConfigError(f"Trainer(backend={backend!r}): must be one of {BACKENDS}")
    if address is not None and backend == "local":
        raise ConfigError(f"Trainer(address={address!r}) needs backend='ray', not 'local'")
    if flow.is_initialized():
        current = flow.backend_name()
        if backend in (None, current):
            if address is not None:
                logger.info("backend %r is running already; address=%r unused", current, address)
            if _lease_backend == current:
                _lease_users += 1
                return True
            return False
    name = backend or "ray"
    flow.init(name, **({"address": address} if address else {}))
    _lease_backend, _lease_users = name, 1
    return True


def _release_backend() -> None:
    global _lease_backend, _lease_users
    _lease_users -= 1
    if _lease_users > 0:
        return
    if flow.is_initialized() and flow.backend_name() == _lease_backend:
        flow.shutdown()
    _lease_backend, _lease_users = None, 0


class Trainer:
    """Drives one algorithm's plan: train, save/restore, evaluate, stop.

    Args:
        algo: registered algorithm name (``"pg"``, ``"a2c"``, ``"a3c"``, ``"ppo"``, ...).
        env: Gymnasium id or zero-argument env creator (default: the config's default).
        num_workers: remote rollout workers (default: the config's default).
        seed: seed of envs, policies and sampling (default: the config's default).
        plan: a plan to run instead of the algorithm's own (same signature).
        backend: ``"ray"`` or ``"local"``. ``None``: the running flow backend if there is one,
            else ``"ray"`` (a local Ray is started for you).
        address: Ray cluster address to connect to (``backend="ray"`` only).
        config: the algorithm's config as an instance of its config class or a dict of fields
            (RLlib style); keyword arguments override its fields.
        **config_fields: any other field of the algorithm's config class.

    Bad input (unknown algorithm, config key, env id; wrong type or range) raises
    :class:`ConfigError` before any backend or actor starts. Tuned defaults are not applied.
    """

    def __init__(
        self,
        algo: str,
        *,
        env: str | Callable[[], Any] = _UNSET,
        num_workers: int = _UNSET,
        seed: int | None = _UNSET,
        plan: PlanFn | None = None,
        backend: str | None = None,
        address: str | None = None,
        config: AlgorithmConfig | Mapping[str, Any] | None = None,
        **config_fields: Any,
    ) -> None:
        """Validate everything, then start the backend, the workers and build the plan once."""
        self._spec = _get_spec(algo)
        given = {"env": env, "num_workers": num_workers, "seed": seed}
        base: dict[str, Any] = {}
        if isinstance(config, AlgorithmConfig):
            base = config.to_dict()
        elif isinstance(config, Mapping):
            base = dict(config)
        elif config is not None:
            raise ConfigError(
                f"Trainer(config={config!r}): must be a {self._spec.config_cls.__name__}, a dict "
                "of its fields, or None"
            )
        fields = base | {k: v for k, v in given.items() if v is not _UNSET} | config_fields
        self._config: AlgorithmConfig = self._spec.config_cls.from_dict(fields)
        check_env(self._config)
        if plan is not None and not callable(plan):
            raise ConfigError(f"Trainer(plan={plan!r}): must be a function (workers, config)")
        self._plan_fn: PlanFn = plan if plan is not None else self._spec.plan
        self._custom_plan = plan is not None
        self._stopped = True
        self._owns_backend = _acquire_backend(backend, address)
        try:
            self.workers: Any = _make_workers(self._config, self._spec.policy_cls)
            """The run's WorkerSet: ``local_worker()`` (the learner) and ``remote_workers()``."""
            try:
                self._plan = self._build_plan()
            except BaseException:
                self.workers.stop()
                raise
        except BaseException:
            if self._owns_backend:
                _release_backend()
            raise
        self._stopped = False
        self._iteration = 0
        self._time_total_s = 0.0
        self._last_sampled = 0

    def _build_plan(self) -> LocalIterator[dict[str, Any]]:
        plan = self._plan_fn(self.workers, self._config)
        if not isinstance(plan, LocalIterator):
            raise PlanError(
                f"plan {getattr(self._plan_fn, '__qualname__', self._plan_fn)!r} returned "
                f"{type(plan).__name__}; a plan must return a LocalIterator of result dicts"
            )
        self._context = MetricsContext()
        plan.shared_metrics.set(self._context)
        return plan

    # ------------------------------------------------------------------------ properties
    @property
    def algorithm(self) -> str:
        """The algorithm's registered name."""
        return str(self._spec.name)

    @property
    def config(self) -> AlgorithmConfig:
        """The validated (frozen) config of this run."""
        return self._config

    @property
    def iteration(self) -> int:
        """Number of :meth:`train` calls so far (restored from checkpoints)."""
        return self._iteration

    @property
    def metrics(self) -> MetricsContext:
        """The plan's shared context, owned by the trainer (counters, timers, info)."""
        return self._context

    def plan_graph(self) -> PlanGraph:
        """The plan's operator graph (``.to_mermaid()`` renders it); nothing runs."""
        return self._plan.describe()

    # ------------------------------------------------------------------------ training
    def _check_running(self, what: str) -> None:
        if self._stopped:
            raise RLFlowError(f"Trainer.{what}(): the trainer is stopped; create a new one")

    def train(self) -> dict[str, Any]:
        """Run one iteration: pull one result from the plan and add the trainer's bookkeeping.

        Returns the plan's result dict plus ``iteration``, ``time_this_iter_s``,
        ``time_total_s`` and ``env_steps_per_s``; every key of :data:`RESULT_KEYS` is present.
        """
        self._check_running("train")
        start = time.perf_counter()
        try:
            result = next(self._plan)
        except StopIteration:
            raise PlanError(f"the plan {self._plan!r} ended; a plan must never end") from None
        elapsed = time.perf_counter() - start
        if not isinstance(result, Mapping):
            raise PlanError(f"the plan yielded {type(result).__name__}; it must yield dicts")
        return self._bookkeep(dict(result), elapsed)

    def _bookkeep(self, result: dict[str, Any], elapsed: float) -> dict[str, Any]:
        counters = self._context.counters
        self._iteration += 1
        self._time_total_s += elapsed
        result.setdefault(_SAMPLED, int(counters.get(_SAMPLED, 0)))
        result.setdefault(_TRAINED, int(counters.get(_TRAINED, 0)))
        result.setdefault("episode_return_mean", None)
        result.setdefault("episode_len_mean", None)
        result.setdefault("episodes_total", 0)
        sampled = int(result[_SAMPLED])
        steps = sampled - self._last_sampled
        self._last_sampled = sampled
        result["iteration"] = self._iteration
        result["time_this_iter_s"] = elapsed
        result["time_total_s"] = self._time_total_s
        result["env_steps_per_s"] = steps / elapsed if elapsed > 0 else 0.0
        return result

    def evaluate(self, num_episodes: int = 10, *, seed: int | None = None) -> dict[str, Any]:
        """Play ``num_episodes`` with greedy (deterministic) actions of the learner's policy.

        Uses a fresh env (not the workers'), seeded with ``seed`` (default: the config's seed
        plus 1_000_003, so it differs from every training env) at its first reset. Training state
        is untouched. Returns ``episode_return_mean/min/max``, ``episode_len_mean`` and
        ``episodes``; for a multi-agent env also ``policy_reward_mean/min/max`` (each agent's
        return with its policy, as in training results).
        """
        self._check_running("evaluate")
        if isinstance(num_episodes, bool) or not isinstance(num_episodes, int) or num_episodes < 1:
            raise ConfigError(f"Trainer.evaluate(num_episodes={num_episodes!r}): must be int >= 1")
        from rlflow.envs import make_env_creator

        if seed is None and self._config.seed is not None:
            seed = self._config.seed + 1_000_003
        local = self.workers.local_worker()
        env = make_env_creator(self._config.env, **self._config.env_config)()
        returns, lengths, stats = [], [], []
        try:
            for episode in range(num_episodes):
                episode_seed = seed if episode == 0 else None
                if local.multi_agent:
                    stat = _play_multi_agent_episode(
                        env, local.policy_map, self._config.policy_mapping_fn, episode_seed
                    )
                    ret, length = stat.return_, stat.length
                    stats.append(stat)
                else:
                    ret, length = _play_episode(env, local.get_policy(), episode_seed)
                returns.append(ret)
                lengths.append(length)
        finally:
            env.close()
        from rlflow.ops.metrics import policy_return_stats

        return {
            **policy_return_stats(stats),
            "episode_return_mean": float(np.mean(returns)),
            "episode_return_min": float(np.min(returns)),
            "episode_return_max": float(np.max(returns)),
            "episode_len_mean": float(np.mean(lengths)),
            "episodes": num_episodes,
        }

    # ------------------------------------------------------------------------ checkpoints
    def save(self, checkpoint_dir: str | Path) -> str:
        """Write a checkpoint into ``checkpoint_dir`` (created); return its path.

        Holds the config, algorithm, the workers' states (weights, optimizer, RNGs, ...), the
        counters, iteration and time totals and the driver's RNG states, pickled, plus a small
        JSON metadata file. Restore with :meth:`restore`.
        """
        self._check_running("save")
        path = Path(checkpoint_dir)
        path.mkdir(parents=True, exist_ok=True)
        state = self._get_state()
        tmp = path / (CHECKPOINT_STATE + ".tmp")
        with tmp.open("wb") as fh:
            pickle.dump(state, fh, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path / CHECKPOINT_STATE)
        env = self._config.env
        meta = {
            "format": _FORMAT,
            "version": _VERSION,
            "algorithm": self.algorithm,
            "env": env if isinstance(env, str) else getattr(env, "__qualname__", repr(env)),
            "iteration": self._iteration,
            "time_total_s": self._time_total_s,
            _SAMPLED: int(self._context.counters.get(_SAMPLED, 0)),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (path / CHECKPOINT_META).write_text(json.dumps(meta, indent=2) + "\n")
        return str(path)

    def _get_state(self) -> dict[str, Any]:
        import torch

        remotes = self.workers.remote_workers()
        plan = self._plan_fn if self._custom_plan and _picklable(self._plan_fn) else None
        return {
            "algorithm": self.algorithm,
            "config": self._config.to_dict(),
            "plan": plan,
            "local_worker": self.workers.local_worker().get_state(),
            "remote_workers": flow.get([w.get_state.remote() for w in remotes]),
            "metrics": self._context.save(),
            "iteration": self._iteration,
            "time_total_s": self._time_total_s,
            "last_sampled": self._last_sampled,
            "rng": {
                "python": random.getstate(),
                "numpy": np.random.get_state(),
                "torch": torch.get_rng_state(),
            },
        }

    def _set_state(self, state: Mapping[str, Any]) -> None:
        import torch

        self.workers.local_worker().set_state(state["local_worker"])
        remotes, saved = self.workers.remote_workers(), state["remote_workers"]
        flow.get([w.set_state.remote(s) for w, s in zip(remotes, saved, strict=False)])
        if len(remotes) != len(saved):
            logger.warning(
                "checkpoint has %d remote worker states, this run %d; workers without a saved "
                "state get the learner's weights",
                len(saved),
                len(remotes),
            )
            self.workers.sync_weights()
        self._context.restore(state["metrics"])
        self._iteration = int(state["iteration"])
        self._time_total_s = float(state["time_total_s"])
        self._last_sampled = int(state["last_sampled"])
        random.setstate(state["rng"]["python"])
        np.random.set_state(state["rng"]["numpy"])
        torch.set_rng_state(state["rng"]["torch"])

    @classmethod
    def restore(cls, checkpoint_dir: str | Path, **overrides: Any) -> Self:
        """Rebuild the trainer saved in ``checkpoint_dir`` and load its state.

        ``overrides`` are constructor arguments that replace the saved ones: ``backend``,
        ``address``, ``plan`` or config fields (e.g. ``num_workers``). A synchronous run restored
        on the local backend continues exactly as the saved one would have.
        """
        state = load_checkpoint(checkpoint_dir)
        kwargs: dict[str, Any] = dict(state["config"])
        if state.get("plan") is not None:
            kwargs["plan"] = state["plan"]
        kwargs.update(overrides)
        trainer = cls(state["algorithm"], **kwargs)
        try:
            trainer._set_state(state)
        except BaseException:
            trainer.stop()
            raise
        return trainer

    # ------------------------------------------------------------------------ shutdown
    def stop(self) -> None:
        """Stop the plan's learner threads and the workers; shut the backend down if this
        trainer started it. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            from rlflow.ops.concurrency import stop_learner_threads

            stop_learner_threads(self.workers.local_worker())
            self.workers.stop()
        finally:
            if self._owns_backend:
                self._owns_backend = False
                _release_backend()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else f"iteration={self._iteration}"
        return f"Trainer({self.algorithm!r}, env={self._config.env!r}, {state})"


def load_checkpoint(checkpoint_dir: str | Path) -> dict[str, Any]:
    """The pickled state of a checkpoint directory (or of its state file), checked."""
    path = Path(checkpoint_dir)
    if path.is_file():
        path = path.parent
    meta_file, state_file = path / CHECKPOINT_META, path / CHECKPOINT_STATE
    if not meta_file.is_file() or not state_file.is_file():
        raise ConfigError(
            f"{str(path)!r} is not an rlflow checkpoint: it needs {CHECKPOINT_META} and "
            f"{CHECKPOINT_STATE} (written by Trainer.save)"
        )
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"checkpoint {str(path)!r}: bad {CHECKPOINT_META} ({err})") from None
    if meta.get("format") != _FORMAT or meta.get("version") != _VERSION:
        raise ConfigError(
            f"checkpoint {str(path)!r}: format {meta.get('format')!r} version "
            f"{meta.get('version')!r} is not {_FORMAT!r} version {_VERSION}"
        )
    with state_file.open("rb") as fh:
        state: dict[str, Any] = pickle.load(fh)
    return state


def _picklable(fn: Any) -> bool:
    try:
        pickle.dumps(fn)
    except Exception:  # noqa: BLE001 - any failure means "not picklable"
        return False
    return True


def _play_episode(env: Any, policy: Any, seed: int | None) -> tuple[float, int]:
    """One greedy episode; returns (undiscounted return, length)."""
    from gymnasium import spaces

    obs, _ = env.reset(seed=seed)
    total, length, done = 0.0, 0, False
    while not done:
        actions, _ = policy.compute_actions(np.asarray(obs)[None], explore=False)
        action = actions[0]
        if isinstance(env.action_space, spaces.Box):
            action = np.clip(action, env.action_space.low, env.action_space.high)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        length += 1
        done = bool(terminated or truncated)
    return total, length


def _play_multi_agent_episode(
    env: Any, policies: Mapping[str, Any], mapping_fn: Any, seed: int | None
) -> Any:
    """One greedy episode of a multi-agent env; its `rlflow.envs.EpisodeStat`."""
    from rlflow.envs import AgentReturn, EpisodeStat
    from rlflow.envs.multi_agent import ALL_AGENTS
    from rlflow.workers.multi_agent_sampler import (
        agent_policy_map,
        as_multi_agent_env,
        env_action,
    )

    env = as_multi_agent_env(env)
    obs, _ = env.reset(seed=seed)
    policy_of = agent_policy_map(list(env.possible_agents), mapping_fn, list(policies))
    lives: list[Any] = []
    running: dict[str, float] = {}
    length = 0
    while True:
        actions = {}
        for agent in env.agents:
            action, _ = policies[policy_of[agent]].compute_actions(
                np.asarray(obs[agent])[None], explore=False
            )
            actions[agent] = env_action(env.action_spaces[agent], action[0])
        step = env.step(actions)
        length += 1
        for agent, reward in step.rewards.items():
            running[agent] = running.get(agent, 0.0) + float(reward)
        for agent in step.obs:
            if step.terminateds.get(agent) or step.truncateds.get(agent):
                lives.append(AgentReturn(agent, policy_of[agent], running.pop(agent, 0.0)))
        if step.terminateds.get(ALL_AGENTS) or step.truncateds.get(ALL_AGENTS):
            lives.extend(AgentReturn(a, policy_of[a], r) for a, r in running.items())
            return EpisodeStat(float(sum(x.return_ for x in lives)), length, tuple(lives))
        obs = step.obs

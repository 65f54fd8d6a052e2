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

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import numpy.typing as npt

from rlflow import trainer_state
from rlflow.backend_lease import acquire_backend, release_backend
from rlflow.checkpoint import (
    CHECKPOINT_META,
    CHECKPOINT_STATE,
    load_checkpoint,
    picklable,
    write_checkpoint,
)
from rlflow.checks import check_bool, check_callable, check_int
from rlflow.config import DEFAULT_POLICY_ID, AlgorithmConfig
from rlflow.envs.validation import env_name
from rlflow.errors import ConfigError, PlanError, RLFlowError
from rlflow.export import writer as export_writer
from rlflow.export.loaded import batch_actions, memory_of_one, obs_batch, single_result
from rlflow.flow import LocalIterator, MetricsContext, PlanGraph
from rlflow.flow.metrics import STAGE_FN_TIME, STAGE_ITEMS, STAGE_WAIT_TIME
from rlflow.loggers import LoggerSet
from rlflow.models.memory import RecurrentInputs, state_out_key, stored_state
from rlflow.ops.keys import NUM_ENV_STEPS_SAMPLED, NUM_ENV_STEPS_TRAINED
from rlflow.ops.learner_thread import learners_paused
from rlflow.ops.metrics import episode_stats, team_return_stats
from rlflow.ops.self_play import headline_rates, measure_learner
from rlflow.setup import TrainerSetup, resolve_setup

if TYPE_CHECKING:
    from rlflow.workers.placement import StartedWorkers

__all__ = [
    "CHECKPOINT_META",
    "CHECKPOINT_STATE",
    "RESULT_KEYS",
    "Trainer",
    "load_checkpoint",
]

logger = logging.getLogger(__name__)

PlanFn = Callable[[Any, Any], LocalIterator[dict[str, Any]]]
"""A plan: ``plan(workers, config) -> LocalIterator[dict]`` yielding one result per iteration."""

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


def _build_learner(setup: TrainerSetup) -> Any:
    """The learner's rollout worker (index 0), built on the driver before any backend or actor
    starts: building it is the run's check of its env (every policy on the env's spaces, the
    observation filter), a `ConfigError` naming the algorithm, the env and its spaces."""
    from rlflow.config.resources import check_learner_gpu
    from rlflow.workers import RolloutWorker

    check_learner_gpu(setup.config)  # before a policy is built on cuda
    spec = setup.algorithm
    return RolloutWorker(setup.config, spec.policy_cls, worker_index=0, algorithm=spec.name)


def _resolve_envs_per_worker(setup: TrainerSetup) -> TrainerSetup:
    """``setup`` with ``num_envs_per_worker="auto"`` replaced by the number measured on the
    driver (`rlflow.workers.envs_per_worker`), before any backend or actor starts."""
    from rlflow.workers.envs_per_worker import resolve_num_envs_per_worker

    config = resolve_num_envs_per_worker(setup.config, setup.algorithm.policy_cls)
    return setup._replace(config=config)


def _make_workers(config: AlgorithmConfig, policy_cls: type, learner: Any, started: Any) -> Any:
    """Build the :class:`~rlflow.workers.WorkerSet` of a run around its learner (starts the
    remote actors, or adopts those ``started`` for it)."""
    from rlflow.workers import WorkerSet

    return WorkerSet(config, policy_cls, local_worker=learner, started=started)


class Trainer:
    """Drives one algorithm's plan: train, save/restore, evaluate, stop.

    Args:
        algo: registered algorithm name (``"pg"``, ``"a2c"``, ``"a3c"``, ``"ppo"``, ...), or a
            :class:`TrainerSetup` from :func:`resolve_setup` (an algorithm and its config,
            resolved once: then no config argument may be given).
        env: Gymnasium id or zero-argument env creator (default: the config's default).
        num_workers: remote rollout workers (default: the config's default).
        seed: seed of envs, policies and sampling (default: the config's default).
        plan: a plan to run instead of the algorithm's own (same signature).
        backend: ``"ray"`` or ``"local"``. ``None``: the running flow backend if there is one,
            else ``"ray"`` (a local Ray is started for you).
        address: Ray cluster address to connect to (``backend="ray"`` only).
        logdir: run dir where the config's ``loggers`` write every result (`rlflow.loggers`),
            a local path or an ``s3://`` / ``gs://`` URI (staged locally, `rlflow.storage`);
            None: none of them (loggers added with ``trainer.loggers.add`` still get results).
        config: the algorithm's config as an instance of its config class or a dict of fields
            (RLlib style); keyword arguments override its fields.
        started_workers: remote rollout workers already started for ``algo``'s config (a
            `TrainerSetup`'s, the same object) with
            `rlflow.workers.placement.start_remote_workers`, adopted instead of starting new
            ones. If building the learner's worker or the `WorkerSet` fails, they are stopped
            (an error before that leaves them to the caller). The command line starts them
            before it imports torch when it connects to a running Ray, and stops them if no
            trainer took them.
        **config_fields: any other field of the algorithm's config class.

    Bad input (unknown algorithm, config key, env id; wrong type or range) raises
    :class:`ConfigError` before any backend or actor starts. Tuned defaults are not applied.
    A trained policy acts through :meth:`compute_single_action` / :meth:`compute_actions` and
    is exported with :meth:`export_policy` for `rlflow.load_policy` (RLlib's names). Each of
    them holds the plan's learner threads (IMPALA, APPO, Ape-X) between updates
    (`rlflow.ops.learner_thread.learners_paused`), so a call sees one version of the weights;
    with an ``observation_filter`` they take raw observations, which the learner's filter
    normalizes, frozen.
    """

    def __init__(
        self,
        algo: str | TrainerSetup,
        *,
        env: str | Callable[[], Any] = _UNSET,
        num_workers: int = _UNSET,
        seed: int | None = _UNSET,
        plan: PlanFn | None = None,
        backend: str | None = None,
        address: str | None = None,
        logdir: str | Path | None = None,
        config: AlgorithmConfig | Mapping[str, Any] | None = None,
        started_workers: StartedWorkers | None = None,
        **config_fields: Any,
    ) -> None:
        """Validate everything and build the learner's worker (the env's check), then start the
        backend and the remote workers and build the plan once."""
        given = {"env": env, "num_workers": num_workers, "seed": seed} | config_fields
        fields = {k: v for k, v in given.items() if v is not _UNSET}
        if isinstance(algo, TrainerSetup):
            if fields or config is not None:
                raise ConfigError(
                    f"Trainer({algo.algorithm.name!r} setup): its config is resolved; change "
                    f"it before resolve_setup, not here (got {sorted(fields) or ['config']})"
                )
            setup = algo
        else:
            setup = resolve_setup(algo, config, **fields)
        if setup.config.num_envs_per_worker == "auto":
            setup = _resolve_envs_per_worker(setup)
        self._spec, self._config = setup
        if plan is not None:
            check_callable(plan, "Trainer(plan)")
        self._plan_fn: PlanFn = plan if plan is not None else self._spec.plan
        self._custom_plan, self._stopped = plan is not None, True
        if plan is None and self._config.reads_recorded() and not self._spec.reads_input:
            from rlflow.algorithms import ALGORITHMS

            readers = sorted(n for n, s in ALGORITHMS.items() if s.reads_input)
            raise ConfigError(
                f"{self._spec.name} does not read recorded experience, but its config names "
                f"some (input / input_mix); the algorithms that do: {readers} (or pass a plan "
                "that reads rlflow.ops.experience)"
            )
        self.loggers = LoggerSet(self._config.loggers, logdir)
        """Where each result goes (`rlflow.loggers.LoggerSet`); ``.add(logger)`` adds yours."""
        self._owns_backend = False
        try:
            self.workers: Any = self._start_workers(setup, backend, address, started_workers)
            """The run's WorkerSet: ``local_worker()`` (the learner) and ``remote_workers()``."""
        except BaseException:
            self.loggers.close()  # a remote logdir's staging folder
            raise
        try:
            self._plan = self._build_plan()
        except BaseException:
            try:
                self.workers.stop()  # the learner with the remote workers
                if self._owns_backend:
                    release_backend()
            finally:
                self.loggers.close()
            raise
        self._stopped = False
        self._iteration = 0
        self._time_total_s = 0.0
        self._last_sampled = 0

    def _start_workers(
        self,
        setup: TrainerSetup,
        backend: str | None,
        address: str | None,
        started: StartedWorkers | None,
    ) -> Any:
        """Build the learner's worker (the env's check), take a share of the backend, then the
        run's `WorkerSet` (adopting ``started``); on failure what was started is stopped."""
        try:
            learner = _build_learner(setup)
        except BaseException:
            if started is not None:
                started.stop()  # the env's check failed: they would fail too
            raise
        try:
            self._owns_backend = acquire_backend(backend, address)
            return _make_workers(self._config, self._spec.policy_cls, learner, started)
        except BaseException:
            learner.stop()  # no WorkerSet owns it yet
            if started is not None:
                started.stop()  # nothing if the WorkerSet adopted them
            if self._owns_backend:
                release_backend()
            raise

    def _build_plan(self) -> LocalIterator[dict[str, Any]]:
        plan = self._plan_fn(self.workers, self._config)
        if not isinstance(plan, LocalIterator):
            raise PlanError(
                f"plan {getattr(self._plan_fn, '__qualname__', self._plan_fn)!r} returned "
                f"{type(plan).__name__}; a plan must return a LocalIterator of result dicts"
            )
        self._context = MetricsContext()
        plan.shared_metrics.set(self._context)
        built = plan.describe()
        self._graph = built.renumbered()  # stage keys by position: the same in every process
        self._stage_keys = {
            old.key: new.key for old, new in zip(built.nodes, self._graph.nodes, strict=True)
        }
        self.loggers.write_plan(self._graph, algorithm=self._spec.name)  # plan.json
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
        """The plan's operator graph (``.to_mermaid()`` renders it), its nodes numbered by
        position (`PlanGraph.renumbered`): their keys are the results' ``stages`` keys."""
        return self._graph

    # ------------------------------------------------------------------------ training
    def _check_running(self, what: str) -> None:
        if self._stopped:
            raise RLFlowError(f"Trainer.{what}(): the trainer is stopped; create a new one")

    def train(self) -> dict[str, Any]:
        """Run one iteration: pull one result from the plan and add the trainer's bookkeeping.

        Returns the plan's result dict plus ``iteration``, ``time_this_iter_s``, ``time_total_s``,
        ``env_steps_per_s``, ``stages`` (each flow stage's ``items``, ``fn_time_s``, ``wait_time_s``
        since this trainer started) and every ``evaluation_interval`` iterations ``evaluation/``
        keys (:meth:`evaluate`); all :data:`RESULT_KEYS` are there. :attr:`loggers` get it first.
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
        result = self._bookkeep(dict(result), elapsed)
        result.update(self._evaluation_keys())
        self.loggers.on_result(result)
        return result

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
        result["stages"] = self._stage_stats()
        return result

    def _stage_stats(self) -> dict[str, dict[str, float]]:
        """Every stage's statistics, keyed by its node's key in :meth:`plan_graph`."""
        keys = self._stage_keys
        return {keys.get(label, label): s.as_dict() for label, s in self._context.stages.items()}

    def evaluate(
        self,
        num_episodes: int = 10,
        *,
        seed: int | None = None,
        explore: bool = False,
        env_creator: Callable[[], Any] | None = None,
    ) -> dict[str, Any]:
        """Play ``num_episodes`` with the learner's policies: greedy actions, or sampled ones
        with ``explore=True``.

        The episodes run one after the other on a fresh env (not the workers'; built by
        ``env_creator`` if given, e.g. one that renders or records video), reset with
        ``seed`` (default: the config's seed plus 1_000_003, so it differs from every training
        env) at its first reset, through the same sampler as training
        (`rlflow.workers.RolloutWorker.evaluate`): actions are converted and clipped alike.
        Training state is untouched (with ``explore``, the actions draw from the policies'
        generators). Returns ``episode_return_mean/min/max``, ``episode_len_mean`` and
        ``episodes``; for a multi-agent env also ``policy_reward_mean/min/max`` (each agent's
        return with its policy, as in training results). Atari returns are game scores.

        A self-play game (``self_play`` set, its ``evaluation_interval`` not 0), whose mean
        return says nothing (zero-sum: 0), also plays ``num_episodes`` games of each learner
        against a random legal player (the learner greedy, or sampling with ``explore``) and
        as many against its newest snapshot, the seat taking turns
        (`rlflow.ops.self_play.measure_learner`), and returns them as ``self_play``
        (``{learner: {"vs_random": rates, "vs_previous": rates}}``, rates overall and by
        seat) and the headline ``win_rate``, ``draw_rate``, ``loss_rate`` against the random
        player (the lowest learner's, `rlflow.ops.self_play.headline_rates`).
        """
        self._check_running("evaluate")
        num_episodes = check_int(num_episodes, "Trainer.evaluate: num_episodes", low=1)
        explore = check_bool(explore, "Trainer.evaluate: explore")
        if seed is None and self._config.seed is not None:
            seed = self._config.seed + 1_000_003
        local = self.workers.local_worker()
        episodes = local.evaluate(num_episodes, seed=seed, explore=explore, creator=env_creator)
        stats = episode_stats(episodes)
        # A group (`groups`) is one agent: its return is the team's.
        stats.update(team_return_stats(episodes, {g: [g] for g in self._config.groups}))
        settings = self._config.self_play
        if settings is None or settings.evaluation_interval == 0:
            return stats
        games = {
            learner: measure_learner(
                local,
                learner,
                settings.snapshot_ids(learner)[0],
                games=num_episodes,
                seed=seed,
                explore=explore,
                creator=env_creator,
            )
            for learner in self._config.self_play_learners()
        }
        vs_random = {learner: rates["vs_random"] for learner, rates in games.items()}
        return {**stats, **headline_rates(vs_random), "self_play": games}

    def _evaluation_keys(self) -> dict[str, Any]:
        """The ``evaluation/`` keys of the latest iteration: ``evaluation/<key>`` for each key
        of ``evaluate(evaluation_num_episodes)`` (greedy episodes) when the iteration is a
        multiple of ``evaluation_interval``; none when it is not, or the interval is 0."""
        interval = self._config.evaluation_interval
        if interval == 0 or self._iteration % interval:
            return {}
        stats = self.evaluate(self._config.evaluation_num_episodes)
        return {f"evaluation/{key}": value for key, value in stats.items()}

    # ------------------------------------------------------------------------ policies
    def _policy(self, what: str, policy_id: str) -> Any:
        self._check_running(what)
        return self.workers.local_worker().get_policy(policy_id)

    def compute_actions(
        self,
        obs_batch_: npt.ArrayLike,
        *,
        explore: bool = False,
        policy_id: str = DEFAULT_POLICY_ID,
        state: Sequence[npt.ArrayLike] | None = None,
        prev_actions: npt.ArrayLike | None = None,
        prev_rewards: npt.ArrayLike | None = None,
    ) -> Any:
        """Actions ``[B, ...]`` of policy ``policy_id`` for raw observations ``[B,
        *obs_shape]`` (normalized first by the learner's observation filter, frozen, if the
        run has one): greedy, or sampled with ``explore=True`` (drawing from the policy's
        generator, and for DQN counting towards its epsilon schedule, as sampling does). Box
        actions are clipped to the bounds, as the env gets them. `ConfigError` for an unknown
        ``policy_id`` or observations that are not a batch of the policy's observation space.

        A policy with memory (``model.use_lstm``; `rlflow.models.recurrent`) acts from
        ``state`` (None: `get_initial_state`, one row per observation), with the previous
        actions and rewards when its model reads them, and returns ``(actions, state_out)``:
        pass ``state_out`` back with the next observations (RLlib's convention)."""
        explore = check_bool(explore, "Trainer.compute_actions: explore")
        policy = self._policy("compute_actions", policy_id)
        obs = obs_batch(policy.observation_space, obs_batch_, "Trainer.compute_actions")
        if state is not None and not policy.recurrent:
            raise ConfigError(
                f"Trainer.compute_actions: state= given, but policy {policy_id!r} has no memory "
                "(model.use_lstm / use_gru)"
            )
        memory = RecurrentInputs(state, prev_actions, prev_rewards) if policy.recurrent else None
        local = self.workers.local_worker()
        with learners_paused(local):
            obs_filter = local.filters.get(policy_id)
            if obs_filter is not None:
                obs = obs_filter(obs, update=False)
            actions, extra = policy.compute_actions(obs, explore=explore, memory=memory)
        actions = batch_actions(policy.action_space, np.asarray(actions))
        if not policy.recurrent:
            return actions
        return actions, stored_state(extra, state_out_key)

    def get_initial_state(self, policy_id: str = DEFAULT_POLICY_ID) -> list[npt.NDArray[Any]]:
        """The initial state of policy ``policy_id`` for one observation (``[]`` without
        memory): what `compute_single_action` takes as ``state`` at an episode's start."""
        return [s[0] for s in self._policy("get_initial_state", policy_id).initial_state(1)]

    def compute_single_action(
        self,
        obs: npt.ArrayLike,
        *,
        explore: bool = False,
        policy_id: str = DEFAULT_POLICY_ID,
        state: Sequence[npt.ArrayLike] | None = None,
        prev_action: Any = None,
        prev_reward: float | None = None,
    ) -> Any:
        """The action of policy ``policy_id`` for one observation (an ``int`` for a Discrete
        action space); as :meth:`compute_actions` otherwise. A policy with memory returns
        ``(action, state_out)`` from ``state`` (None: `get_initial_state`)."""
        batch = np.expand_dims(np.asarray(obs), 0)
        policy = self._policy("compute_single_action", policy_id)
        memory = memory_of_one(state, prev_action, prev_reward)
        result = self.compute_actions(batch, explore=explore, policy_id=policy_id, **memory)
        return single_result(policy.action_space, result, recurrent=policy.recurrent)

    def export_policy(self, path: str | Path, *, policy_id: str = DEFAULT_POLICY_ID) -> str:
        """Write policy ``policy_id`` as the directory ``path`` for `rlflow.load_policy`, which
        rebuilds it without Ray or workers; return the path.

        ``policy.json`` holds the spaces, the model options, the algorithm and policy class
        and the env (id, ``env_config``, wrappers: observations must be preprocessed as in
        training); ``weights.pt`` the tensors (loaded with ``torch.load(weights_only=True)``).
        A policy class exports its own network by defining ``export_model()``
        (`rlflow.models.actors`); without one, its `ActorCritic` model is exported. The
        learner's observation filter of the policy (``observation_filter``) is saved with its
        current statistics: the loaded policy takes raw observations, as this trainer does.
        When the env's observations are structured (Dict, Tuple, MultiDiscrete, MultiBinary:
        PettingZoo's ``{"observation", "action_mask"}``), the export records their space, and
        the loaded policy takes them as the env gives them (or flat, as the network does).
        """
        policy = self._policy("export_policy", policy_id)
        local = self.workers.local_worker()
        with learners_paused(local):
            return export_writer.export_policy(
                policy,
                path,
                algorithm=self.algorithm,
                policy_id=policy_id,
                config=self.config,
                obs_filter=local.filters.get(policy_id),
                env_observation_space=local.env_observation_spaces.get(policy_id),
            )

    # ------------------------------------------------------------------------ checkpoints
    def save(self, checkpoint_dir: str | Path) -> str:
        """Write a checkpoint as the directory ``checkpoint_dir``; return its path.

        Holds the config (env creators and other callables saved by value with cloudpickle),
        algorithm, the workers' states (weights, optimizer, RNGs, ...), the counters, iteration
        and time totals, the driver's RNG states and, with ``checkpoint_replay_buffers``, the
        plan's replay buffers; plus a small JSON metadata file. Atomic: a checkpoint already at
        ``checkpoint_dir`` is replaced only once the new one is complete
        (`rlflow.checkpoint.write_checkpoint`). Restore with :meth:`restore`.

        ``checkpoint_dir`` may be an ``s3://`` / ``gs://`` URI (`rlflow.storage`): the
        checkpoint is published by its metadata file, uploaded last. A ``logdir`` in object
        storage is synced at each save, before the checkpoint is written
        (`rlflow.loggers.LoggerSet.sync`), so its progress files reach the checkpoint's
        iteration.
        """
        self._check_running("save")
        meta = {
            "algorithm": self.algorithm,
            "env": env_name(self._config.env),
            "iteration": self._iteration,
            "time_total_s": self._time_total_s,
            _SAMPLED: int(self._context.counters.get(_SAMPLED, 0)),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        self.loggers.sync()  # a remote logdir's files up to here, before the checkpoint
        return write_checkpoint(checkpoint_dir, self._get_state(), meta)

    def _get_state(self) -> dict[str, Any]:
        plan = self._plan_fn if self._custom_plan and picklable(self._plan_fn) else None
        return {
            "algorithm": self.algorithm,
            "config": self._config.to_dict(),
            "plan": plan,
            **trainer_state.run_state(self.workers, replay=self._config.checkpoint_replay_buffers),
            "metrics": self._context.save(),
            "stages": self._stage_stats(),
            "iteration": self._iteration,
            "time_total_s": self._time_total_s,
            "last_sampled": self._last_sampled,
        }

    def _set_state(self, state: Mapping[str, Any]) -> None:
        trainer_state.set_run_state(self.workers, state)
        self._context.restore(state["metrics"])
        runtime = {stable: label for label, stable in self._stage_keys.items()}
        for key, saved in state.get("stages", {}).items():  # older checkpoints have none
            stats = self._context.stage(runtime.get(key, key))
            stats.items = int(saved[STAGE_ITEMS])
            stats.fn_time_s = float(saved[STAGE_FN_TIME])
            stats.wait_time_s = float(saved[STAGE_WAIT_TIME])
        self._iteration = int(state["iteration"])
        self._time_total_s = float(state["time_total_s"])
        self._last_sampled = int(state["last_sampled"])

    @classmethod
    def restore(
        cls,
        checkpoint: str | Path | Mapping[str, Any],
        setup: TrainerSetup | None = None,
        **overrides: Any,
    ) -> Self:
        """Rebuild the trainer saved in ``checkpoint`` (a checkpoint directory, or the state
        `load_checkpoint` returned) and load its state.

        ``overrides`` are constructor arguments that replace the saved ones: ``backend``,
        ``address``, ``plan`` or config fields (e.g. ``num_workers``); a Gymnasium id as ``env``
        and an ``algo`` must be the saved ones (another is a `ConfigError`). ``setup`` (from
        :func:`resolve_setup`, the command line's ``--restore``) replaces the saved config
        whole; its algorithm and env must be the saved ones. A damaged, truncated or foreign
        checkpoint raises `ConfigError` naming the file. A synchronous run restored on the local
        backend continues exactly as the saved one would have.

        A checkpoint is code: its state is unpickled with cloudpickle, which runs whatever the
        file says to run. Only restore checkpoints you trust; `export_policy`'s exports are
        JSON and tensors only, loaded without running any of their contents.
        """
        state = checkpoint if isinstance(checkpoint, Mapping) else load_checkpoint(checkpoint)
        saved = state["algorithm"]
        algo = overrides.pop("algo", saved)
        if algo != saved:
            from rlflow.algorithms import get_algorithm

            if get_algorithm(algo).name != saved:
                raise ConfigError(
                    f"restore: the checkpoint is a {saved!r} run, not {algo!r}; a restored run "
                    "keeps its algorithm (leave algo out, or train a new one)"
                )
        if setup is None:
            kwargs = trainer_state.restore_arguments(state, overrides)
            trainer = cls(state["algorithm"], **kwargs)
        else:
            if setup.algorithm.name != state["algorithm"]:
                raise ConfigError(
                    f"restore: the checkpoint is a {state['algorithm']!r} run, the setup "
                    f"{setup.algorithm.name!r}"
                )
            kwargs = trainer_state.restore_arguments(state, overrides, config=setup.config)
            trainer = cls(setup, **kwargs)
        try:
            trainer._set_state(state)
        except BaseException:
            trainer.stop()
            raise
        return trainer

    # ------------------------------------------------------------------------ shutdown
    def stop(self) -> None:
        """Stop the plan's learner threads, close its reads on the actors (`LocalIterator.close`),
        stop the workers; shut the backend down if this trainer started it; close the loggers.
        Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            from rlflow.ops.learner_thread import stop_learner_threads

            stop_learner_threads(self.workers.local_worker())
            self._plan.close()
            self.workers.stop()
        finally:
            if self._owns_backend:
                self._owns_backend = False
                release_backend()
            self.loggers.close()

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

"""Env engines of a rollout worker (``vector_env``): rlflow's in-process loop or any
`gymnasium.vector.VectorEnv` (Gymnasium's sync, async and vectorized envs, EnvPool), behind
the interface of `rlflow.envs.vector.VectorEnv` that `rlflow.workers.VectorSampler` steps.

Engines (`rlflow.config.rollouts.VECTOR_ENVS`):

- ``"rlflow"``: `rlflow.envs.vector.VectorEnv`, N envs stepped in one Python loop.
- ``"gymnasium-sync"``: ``gymnasium.vector.SyncVectorEnv`` of the config's env creator
  (env_config, env_wrappers and flattening apply), same-step autoreset: the same trajectories,
  rewards and episode stats as ``"rlflow"`` for the same seed and actions.
- ``"gymnasium-async"``: ``gymnasium.vector.AsyncVectorEnv``, one subprocess per sub-env,
  same-step autoreset (the same trajectories as ``"rlflow"`` too).
- ``"gymnasium"``: ``gymnasium.make_vec(id, vectorization_mode="vector_entry_point")`` where
  the env is a plain Gymnasium id (no env_wrappers) whose spec has a vectorized entry point
  (CartPole-v1: numpy's ``CartPoleVectorEnv``), else ``"gymnasium-sync"``.
- ``"envpool"``: EnvPool's C++ envs (`rlflow.envs.envpool_env`, the ``envpool`` extra): plain
  Gymnasium ids that EnvPool knows (CartPole-v1, ...) as EnvPool steps them, and ``ALE/...``
  games with rlflow's DeepMind preprocessing (the same observations, game scores and clipped
  rewards; what differs at reset and after a lost life is listed there).
- ``"ale-vector"``: ale_py's C++ ``AtariVectorEnv`` for ``ALE/...`` games with rlflow's
  DeepMind preprocessing (`rlflow.envs.ale_vector`: the same observations, game scores and
  clipped rewards; what differs after a lost life and at reset is listed there).
- ``"auto"``: the fastest engine measured for the env's family (`AUTO_VECTOR_ENV`) among
  those whose trajectories are rlflow's (`EXACT_ENGINES`): ``"rlflow"`` for every family so
  far (benchmarks/README.md, "Env engines").

The rule of ``"auto"``: the fastest engine that gives, for the same seed and actions, the same
observations, rewards, episode boundaries and returns as ``"rlflow"`` (tested step by step in
``tests/envs/test_gym_vector.py``). EnvPool, ``"ale-vector"`` and numpy's vectorized envs give
episodes that match rlflow's only in distribution (their own seeding and no-op draws, a reset
row per episode end; the differences are listed and tested in `rlflow.envs.envpool_env` and
`rlflow.envs.ale_vector`), so ``"auto"`` never picks them, even where they step faster (Pong
on EnvPool: 1.4x rlflow's raw rate per CPU second, 2.4x wall-clock; benchmarks/README.md): a
seeded run's episodes, and so the learning tests' step budgets, would change with the
installed packages, and worker checkpoints cannot hold a C++ engine's state (a restored run
starts new episodes). Choose them by name for throughput.

Next-step autoreset (EnvPool, ``CartPoleVectorEnv``): such an engine resets a finished
episode on the *next* step, ignoring that step's action. The adapter reports that step's row
like a failed step of ``"rlflow"`` (`VectorEnv.restarted`: reward 0, truncated), which the
sampler drops; so each episode end costs one extra env step and a fragment holds one row less
per episode end. They seed differently (EnvPool by its own rule; ``CartPoleVectorEnv`` from one
RNG for all sub-envs), so their trajectories differ from ``"rlflow"``'s.

What only ``"rlflow"`` provides (an explicit other value is a `ConfigError`; ``"auto"`` picks
``"rlflow"``): ``restart_failed_sub_environments``, ``on_nonfinite="skip"``, multi-agent envs.
Worker checkpoints hold the env state of ``"rlflow"`` and ``"gymnasium-sync"`` only: a worker
of the async, EnvPool or ``"ale-vector"`` engine is checkpointed without its envs
(`GymVectorEnv.saves_state`), and restored, it starts new episodes. ``set_task`` (MAML) and
``foreach_env`` need single sub-envs: ``"rlflow"`` and ``"gymnasium-sync"``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode

from rlflow.config.rollouts import VECTOR_ENVS
from rlflow.envs.creator import inner_creator
from rlflow.envs.game_score import GAME_SCORE, reports_game_score
from rlflow.envs.records import EpisodeStat, VectorStep, env_action
from rlflow.envs.validation import check_action_batch, check_observation
from rlflow.envs.vector import VectorEnv
from rlflow.errors import ConfigError, RLFlowError

__all__ = [
    "AUTO_VECTOR_ENV",
    "EXACT_ENGINES",
    "GymVectorEnv",
    "gym_id",
    "make_vector_env",
    "resolve_vector_env",
]

Array = npt.NDArray[Any]

EXACT_ENGINES = ("rlflow", "gymnasium-sync", "gymnasium-async")
"""The engines whose trajectories are rlflow's for the same seed and actions: the only ones
``vector_env="auto"`` may pick (the module docstring gives the rule)."""

AUTO_VECTOR_ENV: dict[str, str] = {"default": "rlflow"}
"""The engine ``vector_env="auto"`` picks by env family (any other family: ``"default"``): the
fastest of `EXACT_ENGINES` measured by ``benchmarks/sampling.py --vector-env``
(benchmarks/README.md); engines that change the trajectories are not picked, so the learning
tests' step counts stay those of rlflow."""


def gym_id(creator: Callable[[], Any]) -> tuple[str, dict[str, Any]] | None:
    """``(Gymnasium id, env kwargs)`` when ``creator`` builds a plain registered env: a
    ``functools.partial(gymnasium.make, id, **kwargs)``, possibly under
    `rlflow.envs.creator.flatten_if_structured` (what `rlflow.envs.config_env_creator`
    builds without env_wrappers); None for anything else.

    >>> gym_id(functools.partial(gym.make, "CartPole-v1", max_episode_steps=10))
    ('CartPole-v1', {'max_episode_steps': 10})
    """
    creator = inner_creator(creator)
    if (
        isinstance(creator, functools.partial)
        and creator.func is gym.make
        and len(creator.args) == 1
        and isinstance(creator.args[0], str)
    ):
        return creator.args[0], dict(creator.keywords)
    return None


def resolve_vector_env(
    vector_env: str,
    creator: Callable[[], Any],
    *,
    restart_failed: bool = False,
    multi_agent: bool = False,
    skip_nonfinite: bool = False,
) -> str:
    """The engine that ``vector_env`` means for envs built by ``creator`` ("auto": the
    measured choice of `AUTO_VECTOR_ENV`, ``"rlflow"`` where a feature needs it). A value not
    in `VECTOR_ENVS`, or an engine that cannot serve the config (see the module docstring), is
    a `ConfigError` naming ``vector_env``; call it before any actor starts.

    >>> resolve_vector_env("auto", functools.partial(gym.make, "CartPole-v1"))
    'rlflow'
    """
    if vector_env not in VECTOR_ENVS:
        allowed = ", ".join(repr(v) for v in VECTOR_ENVS)
        raise ConfigError(f"vector_env={vector_env!r}: must be one of {allowed}")
    needs_own_loop = restart_failed or multi_agent or skip_nonfinite
    if vector_env == "auto":
        return "rlflow" if needs_own_loop else AUTO_VECTOR_ENV["default"]
    if vector_env != "rlflow" and needs_own_loop:
        what = (
            "multi-agent envs"
            if multi_agent
            else "restart_failed_sub_environments=True"
            if restart_failed
            else "on_nonfinite='skip' (it resets single sub-envs)"
        )
        raise ConfigError(
            f"vector_env={vector_env!r}: {what} needs rlflow's own loop; set "
            "vector_env='rlflow' (or 'auto')"
        )
    if vector_env == "envpool":
        from rlflow.envs.envpool_env import check_envpool

        check_envpool(creator)
    if vector_env == "ale-vector":
        from rlflow.envs.ale_vector import check_ale_vector

        check_ale_vector(creator)
    return vector_env


def _vector_entry_point(creator: Callable[[], Any], num_envs: int) -> Any:
    """``gym.make_vec`` with the env's vectorized entry point, or None if it has none."""
    ident = gym_id(creator)
    if ident is None or gym.spec(ident[0]).vector_entry_point is None:
        return None
    return gym.make_vec(ident[0], num_envs, vectorization_mode="vector_entry_point", **ident[1])


def _build(engine: str, creator: Callable[[], Any], num_envs: int, seed: int | None) -> Any:
    """The `gymnasium.vector.VectorEnv` of ``engine`` (not ``"rlflow"``)."""
    if engine == "gymnasium":
        venv = _vector_entry_point(creator, num_envs)
        if venv is not None:
            return venv
    fns = [creator] * num_envs
    if engine == "gymnasium-async":
        return gym.vector.AsyncVectorEnv(fns, copy=False, autoreset_mode=AutoresetMode.SAME_STEP)
    return gym.vector.SyncVectorEnv(fns, copy=False, autoreset_mode=AutoresetMode.SAME_STEP)


def make_vector_env(
    creator: Callable[[], Any],
    num_envs: int,
    seed: int | None,
    *,
    vector_env: str = "rlflow",
    restart_failed: bool = False,
    skip_nonfinite: bool = False,
    env_id: str | None = None,
    worker_index: int | None = None,
) -> VectorEnv | GymVectorEnv:
    """The vector env of engine ``vector_env`` (see the module docstring): a
    `rlflow.envs.vector.VectorEnv` for ``"rlflow"``, else a `GymVectorEnv`; both seed sub-env
    ``j`` with ``seed + j`` (EnvPool: its own seeding from ``seed``).

    >>> venv = make_vector_env(
    ...     functools.partial(gym.make, "CartPole-v1"), 2, 0, vector_env="gymnasium-sync"
    ... )
    >>> venv.reset().shape
    (2, 4)
    >>> venv.close()
    """
    engine = resolve_vector_env(
        vector_env, creator, restart_failed=restart_failed, skip_nonfinite=skip_nonfinite
    )
    if engine == "rlflow":
        return VectorEnv(
            creator, num_envs, seed, restart_failed=restart_failed, env_id=env_id,
            worker_index=worker_index,
        )  # fmt: skip
    if engine == "ale-vector":
        from rlflow.envs.ale_vector import make_ale_vector_env

        return make_ale_vector_env(
            creator, num_envs, seed, env_id=env_id, worker_index=worker_index
        )
    if engine == "envpool":
        from rlflow.envs.envpool_env import make_envpool_env

        return make_envpool_env(creator, num_envs, seed, env_id=env_id, worker_index=worker_index)
    venv = _build(engine, creator, num_envs, seed)
    return GymVectorEnv(venv, seed, env_id=env_id, worker_index=worker_index)


class GymVectorEnv:
    """A `gymnasium.vector.VectorEnv` behind the interface of `rlflow.envs.vector.VectorEnv`:
    ``reset(copy=)``, ``step(actions, copy=)`` returning a `VectorStep`, `pop_episode_stats`,
    `restarted`, `num_restarts`, `close`.

    ``venv`` must autoreset on the same step (``final_obs`` in its info) or on the next step
    (its metadata's ``autoreset_mode``, next-step when unset as in EnvPool; see the module
    docstring for how its reset rows are reported). The first `reset` passes ``seed`` (sub-env
    ``j`` gets ``seed + j`` in Gymnasium's engines), later ones none; the single-env action
    space is seeded with ``seed``. Episode returns and lengths are kept here, from the rewards,
    as `VectorEnv` keeps them (a game-scored Atari env counts whole games).

    Example:
        >>> venv = GymVectorEnv(gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"), 0)
        >>> venv.step_mode
        'next'
        >>> venv.reset().shape
        (2, 4)
        >>> venv.close()
    """

    def __init__(
        self,
        venv: Any,
        seed: int | None,
        *,
        env_id: str | None = None,
        worker_index: int | None = None,
    ) -> None:
        """Wrap ``venv`` (not reset yet); ``env_id`` and ``worker_index`` name it in messages."""
        self.venv = venv
        """The wrapped Gymnasium vector env."""
        self.num_envs: int = venv.num_envs
        """Number of sub-envs."""
        self.observation_space: gym.Space[Any] = venv.single_observation_space
        """Observation space of one sub-env."""
        self.action_space: gym.Space[Any] = venv.single_action_space
        """Action space of one sub-env."""
        mode = getattr(venv, "metadata", {}).get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if mode not in (AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP):
            raise ConfigError(f"GymVectorEnv: autoreset_mode {mode} is not supported")
        self.step_mode = "same" if mode == AutoresetMode.SAME_STEP else "next"
        """``"same"`` or ``"next"``: when ``venv`` resets a finished episode."""
        self.env_id = env_id if env_id is not None else str(getattr(venv, "spec", None) or venv)
        """The env's name in messages."""
        self.worker_index = worker_index
        """The rollout worker holding this vector env, for messages."""
        self.restart_failed = False
        """Always False (only rlflow's loop rebuilds failed sub-envs); `num_restarts` is 0."""
        self.num_restarts = 0
        self.creator: Callable[[], Any] | None = None
        """Unused (samplers restoring a state set it, as on `VectorEnv`)."""
        self.restarted: list[int] = []
        """Next-step engines: the sub-envs whose row of the last `step` was their reset (no
        transition: reward 0, truncated), which samplers drop. Empty otherwise."""
        self.logged_actions: dict[int, Any] = {}
        """Always empty: no client takes actions itself (`rlflow.serve` needs rlflow's loop)."""
        self._seed = seed
        self._needs_reset = True
        self._closed = False
        if seed is not None:
            self.action_space.seed(seed)
        envs: Any = getattr(venv, "envs", None) or [None]
        self._game_scored = reports_game_score(envs[0])
        self._allocate()

    def _allocate(self) -> None:
        """The step buffers and episode trackers."""
        n = self.num_envs
        shape = (n, *self.observation_space.shape)  # type: ignore[misc]
        self._obs = np.zeros(shape, dtype=self.observation_space.dtype)
        self._final_obs = np.zeros_like(self._obs)
        self._rewards = np.zeros(n, dtype=np.float32)
        self._terminateds = np.zeros(n, dtype=bool)
        self._truncateds = np.zeros(n, dtype=bool)
        self._pending = np.zeros(n, dtype=bool)
        self._returns = np.zeros(n, dtype=np.float64)
        self._lengths = np.zeros(n, dtype=np.int64)
        self._episodes: list[EpisodeStat] = []

    @property
    def envs(self) -> list[Any]:
        """The single sub-envs (``"gymnasium-sync"``); `ConfigError` for engines without."""
        envs = getattr(self.venv, "envs", None)
        if envs is None:
            raise ConfigError(
                f"vector_env: the engine {type(self.venv).__name__} has no single sub-envs "
                "(set_task, foreach_env); use vector_env='rlflow' or 'gymnasium-sync'"
            )
        return list(envs)

    def reset(self, *, copy: bool = True) -> Array:
        """Reset every sub-env (the first time with the seed); the first observations
        ``(N, *obs_shape)``; episodes in progress are dropped from the statistics."""
        self._check_open("reset")
        obs, _ = self.venv.reset(seed=self._seed)
        self._seed = None
        self._obs[...] = obs
        for i in range(self.num_envs):
            where = f"GymVectorEnv: env {self.env_id!r}, sub-env {i}, reset()"
            check_observation(self.observation_space, self._obs[i], where=where)
        self._needs_reset = False
        self._pending[:] = False
        self._returns[:] = 0.0
        self._lengths[:] = 0
        return self._obs.copy() if copy else self._obs

    def step(self, actions: npt.ArrayLike, *, copy: bool = True) -> VectorStep:
        """Step every sub-env with its row of ``actions`` (Box actions clipped first); see
        `rlflow.envs.vector.VectorEnv.step`. With ``copy=False`` the arrays returned are
        internal buffers, valid until the next `step` or `reset`."""
        self._check_open("step")
        if self._needs_reset:
            raise RLFlowError("GymVectorEnv.step() was called before reset(); call reset() first")
        obs, rewards, terms, truncs, info = self.venv.step(self._actions(np.asarray(actions)))
        self._rewards[:] = rewards
        self._terminateds[:] = terms
        self._truncateds[:] = truncs
        self._final_obs[...] = obs
        if self.step_mode == "same":
            self._same_step_finals(info)
        else:
            self._next_step_resets(info)
        self._obs[...] = obs
        self._count(info)
        out: list[Any] = [self._obs, self._rewards, self._terminateds, self._truncateds]
        out.append(self._final_obs)
        return VectorStep(*(a.copy() for a in out)) if copy else VectorStep(*out)

    def _same_step_finals(self, info: dict[str, Any]) -> None:
        """The last observations of the episodes that ended, from ``info["final_obs"]``."""
        for i in np.flatnonzero(info.get("_final_obs", ())):
            self._final_obs[i] = info["final_obs"][i]

    def _next_step_resets(self, info: dict[str, Any]) -> None:
        """Mark the rows where a next-step engine reset an episode that ended on the step
        before (see `restarted`); remember the episodes that ended on this one."""
        pending = self._pending
        self.restarted = np.flatnonzero(pending).tolist()
        if self.restarted:
            self._rewards[pending] = 0.0
            self._terminateds[pending] = False
            self._truncateds[pending] = True
            self._final_obs[pending] = self._obs[pending]  # the one the ignored action saw
        pending[:] = (self._terminateds | self._truncateds) & ~pending

    def _count(self, info: dict[str, Any]) -> None:
        """Add the step to the episode returns and lengths; record the episodes that ended."""
        live = np.ones(self.num_envs, dtype=bool)
        if self.restarted:
            live[self.restarted] = False
        self._returns[live] += self._rewards[live]
        self._lengths[live] += 1
        ended = np.flatnonzero((self._terminateds | self._truncateds) & live)
        for i in ended.tolist():
            if self._game_scored:
                score = _game_score(info, i)
                if score is None:
                    continue  # a lost life: the game goes on
                self._returns[i] = score
            self._episodes.append(EpisodeStat(float(self._returns[i]), int(self._lengths[i])))
            self._returns[i], self._lengths[i] = 0.0, 0

    def _actions(self, actions: Array) -> Any:
        """Check the shape of ``actions``; the batch as the engine takes it."""
        space = self.action_space
        check_action_batch(space, actions, self.num_envs, owner="GymVectorEnv.step")
        if isinstance(space, gym.spaces.Discrete):
            return actions.astype(np.int64, copy=False)
        return env_action(space, actions)

    def pop_episode_stats(self) -> list[EpisodeStat]:
        """Return the episodes finished since the last call, in the order they ended."""
        episodes, self._episodes = self._episodes, []
        return episodes

    @property
    def saves_state(self) -> bool:
        """Whether this engine's state can be pickled (worker checkpoints): Gymnasium's sync
        engine only; the others hold subprocesses or C++ state."""
        return isinstance(self.venv, gym.vector.SyncVectorEnv)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle support for Gymnasium's sync engine; others hold processes or C++ state."""
        if not self.saves_state:
            raise RLFlowError(
                f"GymVectorEnv: the state of a {type(self.venv).__name__} cannot be saved "
                "(worker checkpoints); use vector_env='rlflow' or 'gymnasium-sync'"
            )
        return dict(self.__dict__)

    def close(self) -> None:
        """Close the engine; calling it again does nothing."""
        if not self._closed:
            self._closed = True
            self.venv.close()

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise RLFlowError(f"GymVectorEnv.{method}() was called after close()")


def _game_score(info: dict[str, Any], i: int) -> float | None:
    """Sub-env ``i``'s game score in a step's vector info (same-step engines keep the last
    step's info under ``final_info``), or None where the step ended a life, not the game."""
    final = info.get("final_info", info)
    mask = final.get("_" + GAME_SCORE)
    if mask is None or not mask[i]:
        return None
    return float(final[GAME_SCORE][i])

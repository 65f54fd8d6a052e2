"""`VectorEnv`: N Gymnasium envs stepped in one in-process loop, with automatic reset.

For cheap environments a process per env loses to a plain loop (DESIGN.md, "Speed habits");
parallelism comes from rollout workers, each stepping one `VectorEnv`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Self

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from rlflow.checks import check_bool, check_int
from rlflow.envs.game_score import GAME_SCORE, reports_game_score
from rlflow.envs.nonfinite import MAX_RESET_ATTEMPTS, all_finite, first_nonfinite
from rlflow.envs.records import (
    LOGGED_ACTION,
    AgentReturn,
    EpisodeStat,
    VectorStep,
    env_action,
    env_actions,
)
from rlflow.envs.validation import (
    MAX_RESTART_ATTEMPTS,
    OBS_CHECK_STEPS,
    check_action_batch,
    check_env_api,
    check_observation,
    check_returned,
    check_spaces,
    close_quietly,
    env_failure_note,
    env_location,
    env_name,
    restart_seed,
)
from rlflow.errors import ConfigError, NonFiniteError, RLFlowError

__all__ = [
    "AgentReturn",
    "EpisodeStat",
    "VectorEnv",
    "VectorStep",
    "env_action",
    "env_actions",
]

logger = logging.getLogger(__name__)

Array = npt.NDArray[Any]


def _early_senders(envs: list[gym.Env[Any, Any]]) -> list[int]:
    """The sub-envs that take their action before they are stepped (``send_action``: an
    `rlflow.serve.env.ExternalEnv`, whose client then steps while the others are sent theirs),
    unless an action wrapper stands between (it would change the action)."""
    out = []
    for i, env in enumerate(envs):
        if not callable(getattr(env.unwrapped, "send_action", None)):
            continue
        layer: Any = env
        while isinstance(layer, gym.Wrapper) and not isinstance(layer, gym.ActionWrapper):
            layer = layer.env
        if not isinstance(layer, gym.ActionWrapper):
            out.append(i)
    return out


class VectorEnv:
    """N copies of an environment, stepped one after the other in this process.

    Sub-env ``i`` is reset with seed ``seed + i`` at the first reset, later resets are unseeded:
    episodes differ, yet a whole run is reproducible from ``seed`` (``None``: not seeded). The
    single-env `action_space` is seeded with ``seed`` too. A sub-env whose episode ends in
    `step` is reset at once (see `VectorStep`). Observations, rewards and flags are written into
    arrays allocated once; `step` and `reset` return copies of them unless ``copy=False``.

    Observations are checked (`check_observation`) on the first `OBS_CHECK_STEPS` steps after
    the envs are built or rebuilt, and what ``reset`` and ``step`` return (`check_returned`:
    the Gymnasium tuples, so an old Gym env is refused): a mismatch is a `ConfigError` naming
    the env and sub-env.
    Envs with `rlflow.envs.game_score.RecordGameScore` (Atari) count one episode per game, its
    score as the return, however the wrappers above split episodes or clip rewards.

    An exception from a sub-env's ``reset`` or ``step`` gains a note naming ``env_id``,
    ``worker_index`` and the sub-env. With ``restart_failed=True`` the sub-env is instead closed
    and rebuilt by ``creator`` (first reset with `restart_seed`), its episode is dropped from
    the statistics and stepping goes on (`restarted`, `num_restarts`); a rebuilt env whose
    reset fails is rebuilt again, `MAX_RESTART_ATTEMPTS` times at most. `ConfigError` passes.

    Example:
        >>> venv = VectorEnv(lambda: gym.make("CartPole-v1"), num_envs=2, seed=0)
        >>> venv.reset().shape
        (2, 4)
        >>> venv.step(np.array([0, 1])).rewards.tolist()
        [1.0, 1.0]
        >>> venv.close()
    """

    def __init__(
        self,
        creator: Callable[[], gym.Env[Any, Any]],
        num_envs: int,
        seed: int | None,
        *,
        restart_failed: bool = False,
        env_id: str | None = None,
        worker_index: int | None = None,
    ) -> None:
        """Build ``num_envs`` sub-envs with ``creator`` (they are not reset yet). ``env_id``
        and ``worker_index`` name the env in messages (default: its Gymnasium id or class)."""
        num_envs = check_int(num_envs, "VectorEnv: num_envs", low=1)
        if seed is not None:
            seed = check_int(seed, "VectorEnv: seed", low=0)
        restart_failed = check_bool(restart_failed, "VectorEnv: restart_failed")
        self.envs: list[gym.Env[Any, Any]] = [creator() for _ in range(num_envs)]
        self._init_faults(creator, restart_failed, env_id, worker_index)
        self.num_envs = num_envs
        """Number of sub-envs."""
        try:
            check_env_api(self.envs[0], self.env_id)
            self._obs_dtype = check_spaces(self.envs)
        except ConfigError:
            for env in self.envs:
                env.close()
            raise
        self.observation_space: gym.Space[Any] = self.envs[0].observation_space
        """Observation space of one sub-env."""
        self.action_space: gym.Space[Any] = self.envs[0].action_space
        """Action space of one sub-env."""
        self._early_senders = _early_senders(self.envs)
        self._seed = seed
        self._seeded = False
        self._needs_reset = True
        self._closed = False
        if seed is not None:
            self.action_space.seed(seed)
        self._allocate()

    def _init_faults(
        self,
        creator: Callable[[], gym.Env[Any, Any]],
        restart_failed: bool,  # noqa: FBT001 - private, positional like its siblings
        env_id: str | None,
        worker_index: int | None,
    ) -> None:
        """The parts of env-failure handling and observation checks."""
        self.restart_failed = restart_failed
        """Rebuild a sub-env that raises (True) or let the error propagate."""
        self.creator: Callable[[], gym.Env[Any, Any]] | None = creator
        """Builds a sub-env (None after unpickling until the owner sets it again)."""
        self.env_id = env_id if env_id is not None else env_name(self.envs[0])
        """The env's name in messages."""
        self.worker_index = worker_index
        """The rollout worker holding this vector env, for messages (None: not a worker's)."""
        self.num_restarts = 0
        """Sub-env rebuilds so far (over all sub-envs)."""
        self.restarted: list[int] = []
        """Sub-envs whose ``step`` raised in the last `step` and were rebuilt: their row of
        it is no transition (reward 0, truncated, ``final_obs`` the observation the failed
        action was taken on, ``next_obs`` the new env's first one); samplers drop it."""
        self._restarts = [0] * len(self.envs)
        self._obs_checks_left = OBS_CHECK_STEPS

    def _allocate(self) -> None:
        """The step buffers and episode trackers."""
        num_envs = self.num_envs
        obs_shape = (num_envs, *self.observation_space.shape)  # type: ignore[misc]
        self._obs = np.zeros(obs_shape, dtype=self._obs_dtype)
        self._final_obs = np.zeros_like(self._obs)
        self._rewards = np.zeros(num_envs, dtype=np.float32)
        self._terminateds = np.zeros(num_envs, dtype=bool)
        self._truncateds = np.zeros(num_envs, dtype=bool)
        self._ep_returns = [0.0] * num_envs
        self._ep_lengths = [0] * num_envs
        self._episodes: list[EpisodeStat] = []
        self._ended_in_step: dict[int, EpisodeStat] = {}  # sub-env -> its stat of the last step
        self._game_scored = reports_game_score(self.envs[0])
        self.logged_actions: dict[int, Any] = {}
        """``{sub-env: action}`` its client took itself for the observation the last `reset`
        or `step` returned (`rlflow.envs.records.LOGGED_ACTION` in that observation's info:
        `rlflow.serve`); a step returns them in its `VectorStep` too."""

    def reset(self, *, copy: bool = True) -> Array:
        """Reset every sub-env and return the stacked first observations ``(N, *obs_shape)``.

        The first call seeds sub-env ``i`` with ``seed + i``. Episodes in progress are dropped
        from the statistics. With ``copy=False`` the returned array is an internal buffer, valid
        until the next `step` or `reset`.
        """
        self._check_open("reset")
        logged: dict[int, Any] = {}
        for i, env in enumerate(self.envs):
            seed = None if self._seeded or self._seed is None else self._seed + i
            try:
                result = env.reset(seed=seed)
            except ConfigError:
                raise
            except Exception as err:  # noqa: BLE001 - any env error: rebuild or name it
                self._obs[i] = self._rebuild(i, err, "reset")  # checked there
                continue
            self._check_result(i, result, "reset")
            self._obs[i] = result[0]
            if LOGGED_ACTION in result[1]:
                logged[i] = result[1][LOGGED_ACTION]
        self.logged_actions = logged
        self._seeded = True
        self._obs_checks_left = OBS_CHECK_STEPS
        self._needs_reset = False
        self._ep_returns = [0.0] * self.num_envs
        self._ep_lengths = [0] * self.num_envs
        return self._obs.copy() if copy else self._obs

    def step(self, actions: npt.ArrayLike, *, copy: bool = True) -> VectorStep:
        """Step every sub-env with its row of ``actions``, resetting those whose episode ends.

        ``actions`` has shape ``(N,)`` for Discrete spaces and ``(N, *action_shape)`` otherwise;
        Box actions are clipped to the space bounds first. Finished episodes are recorded for
        `pop_episode_stats`. With ``copy=False`` the arrays returned are internal buffers,
        valid until the next `step` or `reset`.
        """
        self._check_open("step")
        if self._needs_reset:
            raise RLFlowError("VectorEnv.step() was called before reset(); call reset() first")
        if self.restarted:
            self.restarted = []
        if self._ended_in_step:
            self._ended_in_step = {}
        check = self._obs_checks_left > 0
        if check:
            self._obs_checks_left -= 1
        rows = self._action_rows(np.asarray(actions))
        for i in self._early_senders:  # external envs: every client gets its action at once
            self.envs[i].unwrapped.send_action(rows[i])  # type: ignore[attr-defined]
        finished = self._step_envs(rows, check=check)
        obs, final_obs = self._obs, self._final_obs
        final_obs[...] = obs
        for i, last_ob in finished:
            final_obs[i] = last_ob
        rewards, terminateds, truncateds = self._rewards, self._terminateds, self._truncateds
        logged = self.logged_actions
        if copy:
            return VectorStep(
                obs.copy(),
                rewards.copy(),
                terminateds.copy(),
                truncateds.copy(),
                final_obs.copy(),
                dict(logged),
            )
        return VectorStep(obs, rewards, terminateds, truncateds, final_obs, logged)

    def _step_envs(self, rows: Any, *, check: bool) -> list[tuple[int, Any]]:
        """Step and auto-reset every sub-env; return (index, last obs) of finished episodes.
        With ``check``, the observations are checked (`check_observation`)."""
        obs, returns, lengths, envs = self._obs, self._ep_returns, self._ep_lengths, self.envs
        finished: list[tuple[int, Any]] = []
        logged: dict[int, Any] = {}
        self.logged_actions = logged
        # Scalars go to lists and the numpy buffers are written once per step: a numpy scalar
        # write per sub-env costs a noticeable part of a cheap env's step.
        step_rewards, step_terms, step_truncs = [], [], []
        start = i = 0
        while start < self.num_envs:
            # One try around the loop (free while nothing raises): after a failure of sub-env
            # i, the loop goes on from i + 1.
            try:
                for i in range(start, self.num_envs):
                    result = envs[i].step(rows[i])
                    if check:  # before unpacking: an old Gym env's 4 values are named
                        self._check_result(i, result, "step")
                    ob, reward, terminated, truncated, info = result
                    step_rewards.append(reward)
                    step_terms.append(terminated)
                    step_truncs.append(truncated)
                    returns[i] += float(reward)
                    lengths[i] += 1
                    if terminated or truncated:
                        self._episode_ended(i, info)
                        finished.append((i, ob))
                        first = envs[i].reset()
                        if check:
                            self._check_result(i, first, "reset")
                        ob, info = first
                    obs[i] = ob
                    if LOGGED_ACTION in info:
                        logged[i] = info[LOGGED_ACTION]
                break
            except ConfigError:
                raise
            except Exception as err:  # noqa: BLE001 - any env error: rebuild it or name it
                self._step_failed(i, err, finished, (step_rewards, step_terms, step_truncs))
                start = i + 1
        self._rewards[:] = step_rewards
        self._terminateds[:] = step_terms
        self._truncateds[:] = step_truncs
        return finished

    def _episode_ended(self, i: int, info: dict[str, Any]) -> None:
        """Count sub-env ``i``'s episode; a game-scored env's only at game over, with the
        score (`rlflow.envs.game_score`) and the steps over all its lives."""
        returns, lengths = self._ep_returns, self._ep_lengths
        if self._game_scored:
            if GAME_SCORE not in info:
                return  # a lost life: the game goes on
            returns[i] = float(info[GAME_SCORE])
        stat = EpisodeStat(returns[i], lengths[i])
        self._episodes.append(stat)
        self._ended_in_step[i] = stat
        returns[i], lengths[i] = 0.0, 0

    def drop_episodes(self, indices: list[int], acted_on: Array) -> None:
        """Drop the episodes of sub-envs ``indices`` at the last `step`, which returned a NaN
        or infinite reward or observation for them (``on_nonfinite="skip"``): each one's row
        of that step becomes one like a failed step's (`restarted`: reward 0, truncated,
        ``final_obs`` its row of ``acted_on``, the observations the actions were taken on), its
        episode is not reported (also when that step ended it), and the sub-env is reset,
        unseeded, unless that step had reset it already (then `ensure_finite_start`)."""
        for i in indices:
            stat = self._ended_in_step.pop(i, None)
            if stat is not None:
                self._episodes.remove(stat)  # an equal one, if several: the same statistics
            else:
                self._ep_returns[i], self._ep_lengths[i] = 0.0, 0
                self._obs[i] = self._reset_one(i)
            self.ensure_finite_start(i)
            self._rewards[i], self._terminateds[i], self._truncateds[i] = 0.0, False, True
            self._final_obs[i] = acted_on[i]
            self.restarted.append(i)

    def ensure_finite_start(self, i: int) -> Array:
        """Reset sub-env ``i`` again (unseeded) while the first observation of its episode is
        not finite, `MAX_RESET_ATTEMPTS` resets in all, then `NonFiniteError`; the (finite)
        first observation."""
        for _ in range(MAX_RESET_ATTEMPTS):
            if all_finite(self._obs[i]):
                break
            self._obs[i] = self._reset_one(i)
        first: Array = self._obs[i]
        if not all_finite(first):
            raise NonFiniteError(
                f"{self._where(i)}: reset() returned a non-finite observation "
                f"({first_nonfinite(first)}) {MAX_RESET_ATTEMPTS + 1} times in a row; "
                "on_nonfinite='skip' drops such episodes, but a new one cannot start"
            )
        return first

    def _reset_one(self, i: int) -> Any:
        """Reset sub-env ``i`` (unseeded, checked); its first observation."""
        result = self.envs[i].reset()
        self._check_result(i, result, "reset")
        return result[0]

    def _step_failed(
        self,
        i: int,
        err: Exception,
        finished: list[tuple[int, Any]],
        step_lists: tuple[list[Any], list[Any], list[Any]],
    ) -> None:
        """Sub-env ``i`` raised in `step`: rebuild it (or raise ``err`` with a note)."""
        stepped = len(step_lists[0]) > i
        if stepped and finished and finished[-1][0] == i:
            # Its episode ended and was counted; only the reset after it failed.
            self._obs[i] = self._rebuild(i, err, "reset")
            return
        for values in step_lists:  # an outcome half taken in is no outcome
            del values[i:]
        ob = self._obs[i].copy()  # the observation the failed action was taken on
        new_ob = self._rebuild(i, err, "step")
        self._ep_returns[i], self._ep_lengths[i] = 0.0, 0  # the episode is dropped
        for values, value in zip(step_lists, (0.0, False, True), strict=True):
            values.append(value)
        finished.append((i, ob))
        self._obs[i] = new_ob
        self.restarted.append(i)

    def _rebuild(self, i: int, err: Exception, method: str) -> Any:
        """Close sub-env ``i``, build a new one and reset it; its first observation. Raises
        ``err`` with a note when restarts are off, the last error when every rebuild failed."""
        note = env_failure_note(self.env_id, self.worker_index, i, method)
        if not self.restart_failed or self.creator is None:
            err.add_note(note)
            raise err
        logger.warning("%s: %r; rebuilding the sub-env", note, err)
        for _ in range(MAX_RESTART_ATTEMPTS):
            close_quietly(self.envs[i])
            self._restarts[i] += 1
            try:
                self.envs[i] = self.creator()
                result = self.envs[i].reset(seed=restart_seed(self._seed, i, self._restarts[i]))
            except ConfigError:
                raise
            except Exception as again:  # noqa: BLE001 - the rebuilt env failed too: once more
                err = again
                continue
            self.num_restarts += 1
            self._obs_checks_left = OBS_CHECK_STEPS
            self._check_result(i, result, "reset")
            return result[0]
        err.add_note(f"{note}; rebuilt {MAX_RESTART_ATTEMPTS} times, each failed to reset")
        raise err

    def _where(self, i: int) -> str:
        """Sub-env ``i`` in messages: the env, the worker and the index."""
        return env_location(self.env_id, self.worker_index, i)

    def _check_result(self, i: int, result: Any, method: str) -> None:
        """`check_returned` of what sub-env ``i``'s ``method`` returned, then
        `check_observation` of its observation."""
        where = f"VectorEnv: {self._where(i)}"
        check_returned(result, method, where=where)
        check_observation(self.observation_space, result[0], where=f"{where}, {method}()")

    def _action_rows(self, actions: Array) -> Any:
        """Check the shape of ``actions`` and convert them to one action per sub-env."""
        space = self.action_space
        check_action_batch(space, actions, self.num_envs, owner="VectorEnv.step")
        return env_actions(space, actions)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle support (worker checkpoints), with the emulator state of ALE sub-envs.

        A pickled ALE env comes back with its settings but a fresh emulator, so the episode
        trackers here would not match it: each sub-env whose unwrapped env has
        ``clone_state`` / ``restore_state`` (ale_py) also saves ``clone_state(include_rng=True)``
        and gets it back on unpickling, and the restored envs continue exactly.
        """
        state = dict(self.__dict__)
        state["creator"] = None  # may not pickle (a lambda); the owner sets it again
        state["_emulator_states"] = [
            env.unwrapped.clone_state(include_rng=True)  # type: ignore[attr-defined]
            if callable(getattr(env.unwrapped, "clone_state", None))
            and callable(getattr(env.unwrapped, "restore_state", None))
            else None
            for env in self.envs
        ]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`__getstate__` (emulator states included). `creator` is None
        until the owner sets it; a state pickled before restarts existed gets their defaults."""
        emulator_states = state.pop("_emulator_states", None) or [None] * len(state["envs"])
        num_envs = len(state["envs"])
        defaults: dict[str, Any] = {
            "restart_failed": False,
            "creator": None,
            "env_id": env_name(state["envs"][0]),
            "worker_index": None,
            "num_restarts": 0,
            "_restarts": [0] * num_envs,
            "restarted": [],
            "_obs_checks_left": 0,
            "_ended_in_step": {},
            "_game_scored": reports_game_score(state["envs"][0]),
        }
        self.__dict__.update(defaults | state)
        if "_early_senders" not in state:  # pickled before external envs existed
            self._early_senders = _early_senders(self.envs)
        for env, emulator in zip(self.envs, emulator_states, strict=True):
            if emulator is not None:
                env.unwrapped.restore_state(emulator)  # type: ignore[attr-defined]

    def pop_episode_stats(self) -> list[EpisodeStat]:
        """Return the episodes finished since the last call, in the order they ended."""
        episodes, self._episodes = self._episodes, []
        return episodes

    def close(self) -> None:
        """Close every sub-env; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        for env in self.envs:
            env.close()

    def __enter__(self) -> Self:
        """Return self; `close` runs on exit."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the sub-envs."""
        self.close()

    def _check_open(self, method: str) -> None:
        """Raise if the env was closed."""
        if self._closed:
            raise RLFlowError(f"VectorEnv.{method}() was called after close()")

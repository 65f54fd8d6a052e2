"""``vector_env="envpool"``: EnvPool's C++ envs as the engine of a rollout worker, classic
control as EnvPool gives it and Atari with rlflow's DeepMind preprocessing.

EnvPool (``pip install "rl-flow[envpool]"``, envpool 1.1.x) steps a worker's envs in a C++
thread, frame skip, max-pooling, resize and frame stack included for Atari, in one call.
`EnvPoolVector` gives its Gymnasium-style pool the shape of a ``gymnasium.vector.VectorEnv``
(``num_envs``, ``single_observation_space``, next-step autoreset) for
`rlflow.envs.gym_vector.GymVectorEnv`; `EnvPoolAtariEnv` adds rlflow's Atari semantics:

- observations ``(84, 84, k)`` uint8, channels last, the newest frame last, as
  `rlflow.envs.atari.wrap_deepmind` gives them (EnvPool's frames are channel-first: a
  transposed view, copied once into the step buffer);
- episode statistics are whole games (the game's own rewards summed from a real reset to game
  over or truncation, as `rlflow.envs.game_score.RecordGameScore`); the learner gets their sign
  when ``clip_rewards`` (EnvPool's clipping is off so that the score stays whole);
- ``episodic_life``: a lost life ends the learner's episode (``terminated``) and the game goes
  on; the engine then runs its reset on the next step (no-ops and FIRE, the game kept), a row
  that the sampler drops (`rlflow.envs.gym_vector.GymVectorEnv.restarted`), as after game over;
- no-op starts (up to 30), FIRE at reset in games that wait for it, sticky actions as
  ``repeat_action_probability`` (0 unless given, as `rlflow.envs.atari.make_atari`), the
  frame limit ``max_num_frames_per_episode`` (108,000 frames: 27,000 steps of 4).

The ``env_config`` keys it maps are `ENVPOOL_ATARI_KWARGS`; any other is a `ConfigError`
naming ``vector_env`` and the key.

What differs from rlflow's own engine (tested in ``tests/envs/test_envpool_env.py``), so that
``vector_env="auto"`` does not pick this engine:

- **Seeds and no-op draws**: sub-env ``j`` is seeded ``seed + j`` as in rlflow, but EnvPool draws
  its no-op counts and sticky actions from its own generator, so seeded trajectories are not
  rlflow's; episode lengths and returns of a random policy match in distribution.
- **Reset**: EnvPool takes 0-29 no-ops then one FIRE in FIRE games (1-30 no-ops elsewhere);
  rlflow takes 1-30 no-ops, FIRE, then action 2.
- **After a lost life** EnvPool runs the same no-ops and FIRE, and keeps the older frames in
  the stack; rlflow takes one NOOP, FIRE and action 2, and starts a fresh stack.
- **Frames**: EnvPool's grayscale (the ALE palette's luminance) and area resize: pixel values
  may differ slightly from `rlflow.envs.frames.WarpFrame`'s (not measured).
- **Next-step reset**: each episode end (a lost life included) costs one env step that is no
  transition (dropped), so a fragment holds one row less per episode end.
- Classic control (CartPole-v1, ...): EnvPool's own physics code and seeding; the trajectories
  differ from Gymnasium's env, and an episode end costs a dropped row as above.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode

from rlflow.envs.gym_vector import GymVectorEnv, gym_id
from rlflow.envs.records import GameScores
from rlflow.errors import ConfigError

__all__ = [
    "ENVPOOL_ATARI_KWARGS",
    "EnvPoolAtariEnv",
    "EnvPoolVector",
    "check_envpool",
    "envpool_task",
    "make_envpool_env",
]

Array = npt.NDArray[Any]

ENVPOOL_ATARI_KWARGS = frozenset(
    {
        "episodic_life",
        "clip_rewards",
        "frame_stack",
        "repeat_action_probability",
        "full_action_space",
        "max_num_frames_per_episode",
        "mode",
        "difficulty",
    }
)
"""The ``env_config`` keys of an ``ALE/...`` env that ``"envpool"`` maps (those of
`rlflow.envs.atari.make_atari` and the ALE that EnvPool has); any other is a `ConfigError`."""

NOOP_MAX = 30
"""Most no-ops after a reset (as `rlflow.envs.atari.NoopResetEnv`)."""

FRAME_SKIP = 4
"""Frames per agent step (as `rlflow.envs.atari.MaxAndSkipEnv`)."""


def envpool_task(creator: Callable[[], Any]) -> tuple[str, dict[str, Any], bool] | None:
    """``(EnvPool task id, env kwargs, is Atari)`` of ``creator``'s env, or None when it is
    neither a plain Gymnasium id nor an ``ALE/`` game with rlflow's DeepMind preprocessing.

    ``"ALE/Pong-v5"`` (`rlflow.envs.creator.make_ale_env`) is EnvPool's ``"Pong-v5"``; a plain
    id (``"CartPole-v1"``) is itself. Whether EnvPool has it is `check_envpool`'s question.
    """
    from rlflow.envs.ale_vector import ale_vector_spec

    spec = ale_vector_spec(creator)
    if spec is not None:
        ale_id, kwargs = spec
        return ale_id.split("/", 1)[1], kwargs, True
    ident = gym_id(creator)
    if ident is None or ident[0].startswith("ALE/"):
        return None
    return ident[0], ident[1], False


def check_envpool(creator: Callable[[], Any]) -> None:
    """`ConfigError` (naming ``vector_env``) unless ``"envpool"`` can build ``creator``'s env:
    envpool importable, an env EnvPool knows (`envpool_task`), and for Atari the DeepMind
    preprocessing with env_config keys among `ENVPOOL_ATARI_KWARGS`."""
    try:
        import envpool
    except ImportError as err:
        raise ConfigError(
            f"vector_env='envpool': envpool could not be imported ({err}); install the envpool "
            'extra (`pip install "rl-flow[envpool]"`, Linux) or choose another vector_env'
        ) from None
    task = envpool_task(creator)
    ident = gym_id(creator)
    if task is None and ident is not None:
        raise ConfigError(
            f"vector_env='envpool': {ident[0]!r} is made without rlflow's DeepMind "
            "preprocessing (raw frames); EnvPool's Atari engine serves env='ALE/...' with it "
            "(env_config deepmind=True, the default); use vector_env='rlflow'"
        )
    if task is None:
        raise ConfigError(
            "vector_env='envpool': the env is an env creator or has env_wrappers; EnvPool builds "
            "plain Gymnasium ids that it knows (envpool.list_all_envs()) and ALE ids with "
            "rlflow's DeepMind preprocessing; use vector_env='rlflow'"
        )
    task_id, kwargs, atari = task
    if task_id not in envpool.list_all_envs():
        raise ConfigError(
            f"vector_env='envpool': EnvPool has no env {task_id!r} (envpool.list_all_envs()); "
            "use vector_env='rlflow'"
        )
    if not atari:
        allowed = set(envpool.make_spec(task_id)._config_keys) - {"num_envs", "seed"}
        unknown = sorted(set(kwargs) - allowed)
        if unknown:
            raise ConfigError(
                f"vector_env='envpool': env_config keys {unknown} are not options of EnvPool's "
                f"{task_id!r} (allowed: {sorted(allowed)}); use vector_env='rlflow'"
            )
        return
    if not kwargs.pop("deepmind", True):
        raise ConfigError(
            "vector_env='envpool' needs the DeepMind preprocessing of an ALE game; env_config "
            "deepmind=False (raw frames) runs on vector_env='rlflow'"
        )
    unknown = sorted(set(kwargs) - ENVPOOL_ATARI_KWARGS)
    if unknown:
        raise ConfigError(
            f"vector_env='envpool': env_config keys {unknown} are not supported by EnvPool's "
            f"Atari engine (allowed: {sorted(ENVPOOL_ATARI_KWARGS)}); use vector_env='rlflow'"
        )


class EnvPoolVector:
    """An EnvPool Gymnasium pool (envpool 1.1: a batched ``gymnasium.Env`` whose spaces are a
    single env's) with the attributes of a ``gymnasium.vector.VectorEnv`` that
    `rlflow.envs.gym_vector.GymVectorEnv` reads: ``num_envs``, ``single_observation_space``,
    ``single_action_space``, ``metadata["autoreset_mode"]`` (next step: EnvPool resets a
    finished env on its next step, ignoring that step's action). With ``channels_last`` the
    ``(N, k, H, W)`` frames are returned as ``(N, H, W, k)`` views."""

    def __init__(self, pool: Any, num_envs: int, *, channels_last: bool = False) -> None:
        """Wrap ``pool`` (``num_envs`` envs, not reset yet)."""
        self.pool = pool
        """The EnvPool env."""
        self.num_envs = num_envs
        """Number of envs in the pool."""
        self.channels_last = channels_last
        """Whether frames are moved to channels last."""
        space = pool.observation_space
        if channels_last:
            k, h, w = space.shape
            space = gym.spaces.Box(0, 255, (h, w, k), np.uint8)
        self.single_observation_space: gym.Space[Any] = space
        """One env's observation space (channels last where `channels_last`)."""
        self.single_action_space: gym.Space[Any] = pool.action_space
        """One env's action space."""
        self.metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP}
        """Next-step autoreset, as EnvPool does."""

    def _obs(self, obs: Array) -> Array:
        return np.moveaxis(obs, 1, -1) if self.channels_last else obs

    def reset(self, *, seed: int | None = None) -> tuple[Array, dict[str, Any]]:
        """Reset every env (EnvPool is seeded when built; ``seed`` is not used)."""
        obs, info = self.pool.reset()
        return self._obs(obs), info

    def step(self, actions: Array) -> tuple[Array, Array, Array, Array, dict[str, Any]]:
        """Step every env with its row of ``actions``."""
        obs, rewards, terminated, truncated, info = self.pool.step(actions)
        return self._obs(obs), rewards, terminated, truncated, info

    def close(self) -> None:
        """Close the pool."""
        self.pool.close()


class EnvPoolAtariEnv(GymVectorEnv):
    """`GymVectorEnv` over EnvPool's Atari pool with rlflow's DeepMind semantics (the module
    docstring says how it matches rlflow's engine, and where it does not).

    Each episode end (a lost life or the game's end) is followed by the engine's reset row,
    `restarted` and dropped by the sampler. Whole-game scores and lengths (agent steps over all
    lives, reset rows not counted) are the episode statistics; the rewards returned are their
    sign when ``clip_rewards``.
    """

    def __init__(
        self,
        venv: EnvPoolVector,
        *,
        clip_rewards: bool = True,
        env_id: str | None = None,
        worker_index: int | None = None,
    ) -> None:
        """Wrap ``venv`` (an Atari pool with ``reward_clip=False``, not reset yet)."""
        super().__init__(venv, None, env_id=env_id, worker_index=worker_index)
        self.clip_rewards = clip_rewards
        """Whether the rewards returned are the sign of the game's."""
        self._games = GameScores(self.num_envs)

    def reset(self, *, copy: bool = True) -> Array:
        """Reset every game (see `GymVectorEnv.reset`); scores in progress are dropped."""
        obs = super().reset(copy=copy)
        self._games.clear()
        return obs

    def _count(self, info: dict[str, Any]) -> None:
        """Add the live rows to the games; record the games that ended (game over, or the
        frame limit); then the rewards the learner gets (their sign when `clip_rewards`)."""
        live = np.ones(self.num_envs, dtype=bool)
        if self.restarted:
            live[self.restarted] = False
        self._games.add(self._rewards, live)
        game_over = np.asarray(info["terminated"], dtype=bool)
        ended = live & ((self._terminateds & game_over) | self._truncateds)
        self._episodes.extend(self._games.finish(np.flatnonzero(ended).tolist()))
        if self.clip_rewards:
            np.sign(self._rewards, out=self._rewards)


def make_envpool_env(
    creator: Callable[[], Any],
    num_envs: int,
    seed: int | None,
    *,
    env_id: str | None = None,
    worker_index: int | None = None,
) -> GymVectorEnv:
    """The ``"envpool"`` engine for ``creator``'s env (checked by `check_envpool`):
    ``num_envs`` envs stepped by one C++ thread (a rollout worker reserves one core; more
    threads were slower on 2 shared cores), env ``j`` seeded ``seed + j`` by EnvPool
    (``seed`` None: 0). Atari games get rlflow's DeepMind semantics (`EnvPoolAtariEnv`);
    other envs are EnvPool's as they are."""
    import envpool

    check_envpool(creator)
    task = envpool_task(creator)
    assert task is not None
    task_id, kwargs, atari = task
    common: dict[str, Any] = {
        "num_envs": num_envs,
        "seed": 0 if seed is None else int(seed),
        "num_threads": 1,  # a rollout worker reserves one core
    }
    if not atari:
        pool = envpool.make_gymnasium(task_id, **common, **kwargs)
        return GymVectorEnv(
            EnvPoolVector(pool, num_envs), None, env_id=env_id or task_id, worker_index=worker_index
        )
    kwargs.pop("deepmind", None)
    frames = int(kwargs.get("max_num_frames_per_episode", 108_000))
    options: dict[str, Any] = {
        "stack_num": int(kwargs.get("frame_stack", 4)),
        "frame_skip": FRAME_SKIP,
        "noop_max": NOOP_MAX,
        "episodic_life": bool(kwargs.get("episodic_life", True)),
        "reward_clip": False,
        "use_fire_reset": True,
        "repeat_action_probability": float(kwargs.get("repeat_action_probability", 0.0)),
        "full_action_space": bool(kwargs.get("full_action_space", False)),
        "max_episode_steps": max(1, frames // FRAME_SKIP),
        "img_height": 84,
        "img_width": 84,
    }
    for key in ("mode", "difficulty"):
        if key in kwargs:
            options[key] = int(kwargs[key])
    pool = envpool.make_gymnasium(task_id, **common, **options)
    return EnvPoolAtariEnv(
        EnvPoolVector(pool, num_envs, channels_last=True),
        clip_rewards=bool(kwargs.get("clip_rewards", True)),
        env_id=env_id or f"ALE/{task_id}",
        worker_index=worker_index,
    )

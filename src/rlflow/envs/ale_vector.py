"""``vector_env="ale-vector"``: ale_py's C++ ``AtariVectorEnv`` as the engine of an Atari worker,
with rlflow's observations, rewards and game scores.

The C++ engine steps all of a worker's games, frame skip, max-pooling, grayscale resize and
frame stack included, in one call; rlflow's own engine (`rlflow.envs.atari.wrap_deepmind`)
steps each game through seven Python wrappers. `AleVectorEnv` makes the C++ engine look like
rlflow's DeepMind preprocessing to the sampler and the model:

- observations ``(84, 84, k)`` uint8, channels last, the newest frame last (the C++ engine's
  frames are channel-first: a transposed view, copied once into the step buffer);
- the game's own rewards are summed into whole-game scores (the episode statistics count games,
  as `rlflow.envs.game_score.RecordGameScore` does), and the learner gets their sign when
  ``clip_rewards`` (the C++ clipping is off);
- ``episodic_life``: a lost life ends the learner's episode (``terminated``) and the game goes
  on; game over and the frame limit end the game, and the engine resets it on the next step,
  a row the sampler drops (`rlflow.envs.gym_vector.GymVectorEnv.restarted`);
- no-op starts (up to 30), FIRE at reset where the game needs it, sticky actions as
  ``repeat_action_probability`` (0 unless given, as `rlflow.envs.atari.make_atari`).

What differs from rlflow's own engine, so that ``"auto"`` does not pick this one (tested in
``tests/envs/test_ale_vector.py``; measured in benchmarks/README.md):

- **After a lost life** the game goes on from the frame where the life was lost, with the
  frame stack kept; rlflow's `rlflow.envs.atari.EpisodicLifeEnv` takes a NOOP and (in FIRE
  games) presses FIRE for the agent, and starts a fresh stack. Here the agent must press FIRE
  itself to serve again in Breakout-like games.
- **FIRE at reset** is one FIRE; rlflow's `rlflow.envs.atari.FireResetEnv` presses FIRE then
  action 2.
- **No-op starts**: the engine's own count and random stream (rlflow: uniform in 1..30 from
  the wrapper's generator), so seeded trajectories are not rlflow's.
- **Frames**: the engine's grayscale (the ALE's palette luminance) and resize; pixel values
  differ slightly from `rlflow.envs.frames.WarpFrame`'s.

Episode returns and lengths of a random policy match rlflow's engine in distribution (Pong:
the test compares them); a policy trained on one engine acts on the other's frames.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from rlflow.envs.gym_vector import GymVectorEnv
from rlflow.envs.records import GameScores
from rlflow.errors import ConfigError

__all__ = ["ALE_VECTOR_KWARGS", "AleVectorEnv", "ale_vector_spec", "make_ale_vector_env"]

Array = npt.NDArray[Any]

ALE_VECTOR_KWARGS = frozenset(
    {
        "episodic_life",
        "clip_rewards",
        "frame_stack",
        "repeat_action_probability",
        "full_action_space",
        "max_num_frames_per_episode",
    }
)
"""The ``env_config`` keys of an ``ALE/...`` env that ``"ale-vector"`` takes (those of
`rlflow.envs.atari.make_atari` that the C++ engine has); any other is a `ConfigError`."""

NOOP_MAX = 30
"""Most no-ops after a reset (as `rlflow.envs.atari.NoopResetEnv`)."""


def _game_name(env_id: str) -> str:
    """The ROM name of an ``ALE/Name-vN`` id: ``"ALE/MsPacman-v5"`` -> ``"ms_pacman"``."""
    name = env_id.split("/", 1)[1].split("-v", 1)[0]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def ale_vector_spec(creator: Callable[[], Any]) -> tuple[str, dict[str, Any]] | None:
    """``(ALE id, env kwargs)`` when ``creator`` builds a DeepMind-preprocessed ALE game
    (`rlflow.envs.creator.make_ale_env` of an ``ALE/`` id, as ``env="ALE/Pong-v5"`` makes it);
    None for anything else."""
    from rlflow.envs.creator import inner_creator, make_ale_env

    creator = inner_creator(creator)
    if (
        isinstance(creator, functools.partial)
        and creator.func is make_ale_env
        and len(creator.args) == 1
        and isinstance(creator.args[0], str)
    ):
        return creator.args[0], dict(creator.keywords)
    return None


def check_ale_vector(creator: Callable[[], Any]) -> None:
    """`ConfigError` unless ``"ale-vector"`` can build ``creator``'s env: an ``ALE/...`` id with
    the DeepMind preprocessing, env_config keys among `ALE_VECTOR_KWARGS`, a ROM that ale_py
    ships, and an ale_py with ``AtariVectorEnv``."""
    spec = ale_vector_spec(creator)
    if spec is None:
        raise ConfigError(
            "vector_env='ale-vector': the env must be an ALE id ('ALE/Pong-v5') with rlflow's "
            "DeepMind preprocessing and no env_wrappers; use vector_env='rlflow'"
        )
    env_id, kwargs = spec
    if not kwargs.pop("deepmind", True):
        raise ConfigError(
            "vector_env='ale-vector' needs the DeepMind preprocessing; env_config deepmind=False "
            "(raw frames) runs on vector_env='rlflow'"
        )
    unknown = sorted(set(kwargs) - ALE_VECTOR_KWARGS)
    if unknown:
        raise ConfigError(
            f"vector_env='ale-vector': env_config keys {unknown} are not supported by the C++ "
            f"engine (allowed: {sorted(ALE_VECTOR_KWARGS)}); use vector_env='rlflow'"
        )
    try:
        from ale_py import roms
        from ale_py.vector_env import AtariVectorEnv  # noqa: F401 (ale_py >= 0.11)
    except ImportError as err:
        raise ConfigError(
            f"vector_env='ale-vector': ale_py's AtariVectorEnv could not be imported ({err}); "
            'install the atari extra (`pip install "rl-flow[atari]"`, ale-py >= 0.11)'
        ) from None
    game = _game_name(env_id)
    if game not in roms.get_all_rom_ids():
        raise ConfigError(
            f"vector_env='ale-vector': {env_id!r} names the ROM {game!r}, which ale_py does not "
            "ship; use vector_env='rlflow'"
        )


class _ChannelsLast(gym.vector.VectorObservationWrapper):
    """The C++ engine's ``(N, k, H, W)`` frames as ``(N, H, W, k)`` (a view)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        k, h, w = env.single_observation_space.shape
        self.single_observation_space = gym.spaces.Box(0, 255, (h, w, k), np.uint8)
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, env.num_envs
        )

    def observations(self, observations: Array) -> Array:
        return np.moveaxis(observations, 1, -1)


class AleVectorEnv(GymVectorEnv):
    """`GymVectorEnv` over ale_py's ``AtariVectorEnv`` (the module docstring says how it
    matches rlflow's DeepMind preprocessing, and where it does not).

    The engine resets a finished game on the next step (its row is `restarted`: dropped by the
    sampler); a lost life ends the learner's episode only. Whole-game scores and lengths are
    the episode statistics; the rewards returned are their sign when ``clip_rewards``.
    """

    def __init__(
        self,
        venv: Any,
        seed: int | None,
        *,
        clip_rewards: bool = True,
        env_id: str | None = None,
        worker_index: int | None = None,
    ) -> None:
        """Wrap ``venv`` (an ``AtariVectorEnv`` with ``reward_clipping=False`` and next-step
        autoreset, not reset yet)."""
        super().__init__(_ChannelsLast(venv), seed, env_id=env_id, worker_index=worker_index)
        if self.step_mode != "next":
            raise ConfigError("AleVectorEnv: the engine must reset games on the next step")
        self.clip_rewards = clip_rewards
        """Whether the rewards returned are the sign of the game's."""
        self._frames = np.zeros(self.num_envs, dtype=np.int64)
        self._games = GameScores(self.num_envs)

    def reset(self, *, copy: bool = True) -> Array:
        """Reset every game (see `GymVectorEnv.reset`); scores in progress are dropped."""
        obs = super().reset(copy=copy)
        self._frames[:] = 0
        self._games.clear()
        return obs

    def _next_step_resets(self, info: dict[str, Any]) -> None:
        """Mark the rows where the engine reset a game (the step before ended the episode and
        the game's frame count went back); a lost life goes on."""
        frames = np.asarray(info["episode_frame_number"], dtype=np.int64)
        reset = self._pending & (frames < self._frames)
        self._frames[:] = frames
        self.restarted = np.flatnonzero(reset).tolist()
        if self.restarted:
            self._rewards[reset] = 0.0
            self._terminateds[reset] = False
            self._truncateds[reset] = True
            self._final_obs[reset] = self._obs[reset]
        self._pending[:] = (self._terminateds | self._truncateds) & ~reset

    def _count(self, info: dict[str, Any]) -> None:
        """Whole games in the statistics (recorded on the engine's reset row); then the
        rewards the learner gets (their sign when `clip_rewards`)."""
        self._episodes.extend(self._games.finish(self.restarted))
        live = np.ones(self.num_envs, dtype=bool)
        live[self.restarted] = False
        self._games.add(self._rewards, live)
        if self.clip_rewards:
            np.sign(self._rewards, out=self._rewards)


def make_ale_vector_env(
    creator: Callable[[], Any],
    num_envs: int,
    seed: int | None,
    *,
    env_id: str | None = None,
    worker_index: int | None = None,
) -> AleVectorEnv:
    """The ``"ale-vector"`` engine for ``creator``'s ALE game (checked by `check_ale_vector`):
    ``num_envs`` games stepped by one C++ thread (a rollout worker reserves one core), the first
    reset seeded with ``seed``."""
    from ale_py.vector_env import AtariVectorEnv

    check_ale_vector(creator)
    spec = ale_vector_spec(creator)
    assert spec is not None
    ale_id, kwargs = spec
    episodic_life = bool(kwargs.get("episodic_life", True))
    venv = AtariVectorEnv(
        _game_name(ale_id),
        num_envs,
        num_threads=1,
        stack_num=int(kwargs.get("frame_stack", 4)),
        frameskip=4,
        noop_max=NOOP_MAX,
        episodic_life=False,
        life_loss_info=episodic_life,
        reward_clipping=False,
        use_fire_reset=True,
        repeat_action_probability=float(kwargs.get("repeat_action_probability", 0.0)),
        full_action_space=bool(kwargs.get("full_action_space", False)),
        max_num_frames_per_episode=int(kwargs.get("max_num_frames_per_episode", 108_000)),
        autoreset_mode="NextStep",
    )
    return AleVectorEnv(
        venv,
        seed,
        clip_rewards=bool(kwargs.get("clip_rewards", True)),
        env_id=env_id or ale_id,
        worker_index=worker_index,
    )

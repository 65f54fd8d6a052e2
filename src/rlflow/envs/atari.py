"""DeepMind Atari preprocessing as Gymnasium wrappers, and `make_atari`.

The protocol of Mnih et al., "Human-level control through deep reinforcement learning" (Nature
2015, Methods: "Preprocessing" and "Training details"), as laid out by OpenAI baselines'
``atari_wrappers`` and used by IMPALA and RLlib. `wrap_deepmind` applies, inner to outer:

0. `rlflow.envs.game_score.RecordGameScore`: the game's score at game over, in ``info``; the
   episode statistics of training and evaluation (`rlflow.envs.vector.VectorEnv`) count whole
   games with it, so ``episode_return_mean`` is the game score, not a clipped return per life.
1. `NoopResetEnv`: 1 to 30 random no-ops after each reset (varied start states).
2. `MaxAndSkipEnv`: repeat each action for 4 frames, sum the rewards, max-pool the last 2
   frames (some sprites are drawn only on odd or even frames).
3. `EpisodicLifeEnv` (training only): a lost life ends the episode for the learner; the game
   is really reset only at game over.
4. `FireResetEnv`: press FIRE after a reset in games that wait for it (Breakout, Pong).
5. `WarpFrame`: luminance, resized to 84x84 by area averaging, shape ``(84, 84, 1)`` uint8.
6. `ClipRewardEnv` (training only): reward -> its sign, in {-1, 0, 1}.
7. `FrameStack`: the last 4 frames along the channel axis, ``(84, 84, 4)`` uint8, HWC, the
   newest frame last; `rlflow.models.nets.NatureCNN` takes this layout as it is.

Observations stay uint8 (4x smaller than float32 in batches and replay); the model divides by
255. The wrappers need an env that emits every frame (ALE ``frameskip=1``); the life and FIRE
logic read ``env.unwrapped.ale.lives()`` and ``env.unwrapped.get_action_meanings()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from rlflow.checks import check_int
from rlflow.envs.frames import FrameStack, WarpFrame
from rlflow.envs.game_score import RecordGameScore
from rlflow.errors import ConfigError

Array = npt.NDArray[Any]
ResetResult = tuple[Any, dict[str, Any]]
StepResult = tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]

__all__ = [
    "FIRE",
    "NOOP",
    "ClipRewardEnv",
    "EpisodicLifeEnv",
    "FireResetEnv",
    "FrameStack",
    "MaxAndSkipEnv",
    "NoopResetEnv",
    "WarpFrame",
    "make_atari",
    "needs_fire_reset",
    "register_ale_envs",
    "wrap_deepmind",
]

NOOP = 0
"""Action index of NOOP in the ALE's minimal and full action sets."""
FIRE = 1
"""Action index of FIRE in the ALE's action sets that have it."""


def _action_meanings(env: gym.Env[Any, Any]) -> list[str] | None:
    """The ALE action meanings of ``env``, or None when it does not report them."""
    meanings = getattr(env.unwrapped, "get_action_meanings", None)
    return list(meanings()) if callable(meanings) else None


def needs_fire_reset(env: gym.Env[Any, Any]) -> bool:
    """Whether ``env`` is a game that waits for FIRE after a reset (action 1 is FIRE)."""
    meanings = _action_meanings(env)
    return meanings is not None and len(meanings) >= 3 and meanings[FIRE] == "FIRE"


class NoopResetEnv(gym.Wrapper[Any, Any, Any, Any]):
    """After each reset, take a random number of NOOPs, uniform in ``1..noop_max``.

    The count is drawn from the wrapper's own generator, seeded by ``reset(seed=...)``. An
    episode that ends during the no-ops is reset again.
    """

    def __init__(self, env: gym.Env[Any, Any], noop_max: int = 30) -> None:
        """Wrap ``env``; ``noop_max >= 0`` (0 disables the no-ops)."""
        check_int(noop_max, "NoopResetEnv: noop_max", low=0)
        meanings = _action_meanings(env)
        if meanings is not None and meanings[NOOP] != "NOOP":
            raise ConfigError(
                f"NoopResetEnv: action {NOOP} of {env} is {meanings[NOOP]!r}, not 'NOOP'"
            )
        super().__init__(env)
        self.noop_max = noop_max
        """Most no-ops taken after a reset."""
        self._rng = np.random.default_rng()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        """Reset the inner env, then take 1 to ``noop_max`` NOOPs."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        obs, info = self.env.reset(seed=seed, options=options)
        if self.noop_max == 0:
            return obs, info
        for _ in range(int(self._rng.integers(1, self.noop_max + 1))):
            obs, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class FireResetEnv(gym.Wrapper[Any, Any, Any, Any]):
    """After each reset, press FIRE then action 2, for games that wait for FIRE to start."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        """Wrap ``env``; `ConfigError` unless its action 1 is FIRE (see `needs_fire_reset`)."""
        if not needs_fire_reset(env):
            raise ConfigError(
                f"FireResetEnv: {env} has no FIRE action at index {FIRE} (action meanings "
                f"{_action_meanings(env)}); wrap only games where needs_fire_reset(env) is True"
            )
        super().__init__(env)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        """Reset the inner env, then step FIRE and action 2 (resetting again if that ends it)."""
        obs, info = self.env.reset(seed=seed, options=options)
        for action in (FIRE, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class EpisodicLifeEnv(gym.Wrapper[Any, Any, Any, Any]):
    """End the episode when a life is lost; really reset the game only at game over.

    `step` reports ``terminated=True`` when ``ale.lives()`` drops (and stays above 0), which
    lets value bootstrapping stop at a life loss (Mnih et al. 2015). The following `reset` then
    takes one NOOP to go on with the same game instead of resetting it. A reset with a ``seed``
    is always a real one. The episode statistics count games all the same (`RecordGameScore`).
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        """Wrap ``env``, whose ``unwrapped.ale.lives()`` gives the lives left."""
        ale = getattr(env.unwrapped, "ale", None)
        if ale is None or not callable(getattr(ale, "lives", None)):
            raise ConfigError(
                f"EpisodicLifeEnv: {env} has no unwrapped.ale.lives(); use it with ALE games only"
            )
        super().__init__(env)
        self.lives = 0
        """Lives left after the last step or reset."""
        self.was_real_done = True
        """Whether the last step ended the game itself (game over or truncation)."""

    def _lives(self) -> int:
        """Lives left, read from the ALE."""
        return int(self.env.unwrapped.ale.lives())  # type: ignore[attr-defined]

    def step(self, action: Any) -> StepResult:
        """Step; ``terminated`` is also True when a life was lost."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = bool(terminated or truncated)
        lives = self._lives()
        # Some games show 0 lives for a few frames before game over: only a drop to > 0 counts.
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetResult:
        """Reset the game after game over (or with a seed), else take one NOOP and go on."""
        if self.was_real_done or seed is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        self.was_real_done = False
        self.lives = self._lives()
        return obs, info


class MaxAndSkipEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Repeat each action ``skip`` times; observe the max over the last 2 frames, sum rewards.

    An episode end stops the repeats: the last two frames of this step are pooled (the last
    alone if it was the first). `reset` returns the raw first frame.
    """

    def __init__(self, env: gym.Env[Any, Any], skip: int = 4) -> None:
        """Wrap ``env``; ``skip >= 1``."""
        check_int(skip, "MaxAndSkipEnv: skip", low=1)
        super().__init__(env)
        self.skip = skip
        """Frames per agent step."""

    def step(self, action: Any) -> StepResult:
        """Repeat ``action`` up to ``skip`` times (stopping at an episode end)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        total = float(reward)
        previous: Array | None = None
        for _ in range(self.skip - 1):
            if terminated or truncated:
                break
            previous = obs
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
        pooled = obs if previous is None else np.maximum(previous, obs)
        return pooled, total, terminated, truncated, info


class ClipRewardEnv(gym.RewardWrapper[Any, Any]):
    """Replace each reward by its sign: -1.0, 0.0 or 1.0 (Mnih et al. 2015)."""

    def reward(self, reward: SupportsFloat) -> float:
        """The sign of ``reward`` as a float."""
        return float(np.sign(float(reward)))


def wrap_deepmind(
    env: gym.Env[Any, Any],
    *,
    episodic_life: bool = True,
    clip_rewards: bool = True,
    frame_stack: int = 4,
    noop_max: int = 30,
    frame_skip: int = 4,
    screen_size: int = 84,
    game_wrappers: Sequence[Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]] = (),
) -> gym.Env[Any, Any]:
    """Apply the DeepMind preprocessing (module docstring) to an env that emits every frame.

    ``game_wrappers`` wrap the game first, in order, below every DeepMind wrapper: they see
    every frame and whole games (e.g. gymnasium's ``RecordVideo``: one video per game).

    ALE envs must be made with ``frameskip=1`` (else `ConfigError`). Turn ``episodic_life`` and
    ``clip_rewards`` off to act on the game's own lives and rewards (episode statistics are
    game scores either way: `RecordGameScore`, innermost). ``frame_stack=1``
    gives ``(screen_size, screen_size, 1)``. FIRE-reset is applied where `needs_fire_reset`.
    """
    check_int(frame_stack, "wrap_deepmind: frame_stack", low=1)
    check_int(frame_skip, "wrap_deepmind: frame_skip", low=1)
    inner_skip = getattr(env.unwrapped, "_frameskip", 1)
    if frame_skip > 1 and inner_skip != 1:
        raise ConfigError(
            f"wrap_deepmind: {env} already skips frames (frameskip={inner_skip!r}) and "
            f"frame_skip={frame_skip} would skip again; create it with frameskip=1"
        )
    for wrap in game_wrappers:
        env = wrap(env)
    env = NoopResetEnv(RecordGameScore(env), noop_max=noop_max)
    if frame_skip > 1:
        env = MaxAndSkipEnv(env, skip=frame_skip)
    if episodic_life and getattr(env.unwrapped, "ale", None) is not None:
        env = EpisodicLifeEnv(env)
    if needs_fire_reset(env):
        env = FireResetEnv(env)
    env = WarpFrame(env, width=screen_size, height=screen_size)
    if clip_rewards:
        env = ClipRewardEnv(env)
    if frame_stack > 1:
        env = FrameStack(env, k=frame_stack)
    return env


def register_ale_envs() -> None:
    """Register the ``ALE/...`` ids with Gymnasium; `ConfigError` if ale-py is missing."""
    try:
        import ale_py
    except ImportError as err:
        raise ConfigError(
            f"make_atari: ale-py could not be imported ({err}); install the atari extra: "
            '`pip install "rl-flow[atari]"` (ale-py, which ships the game ROMs)'
        ) from err
    gym.register_envs(ale_py)


def make_atari(
    env_id: str,
    *,
    seed: int | None = None,
    episodic_life: bool = True,
    clip_rewards: bool = True,
    frame_stack: int = 4,
    game_wrappers: Sequence[Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]] = (),
    **env_kwargs: Any,
) -> gym.Env[Any, Any]:
    """Make an ALE game with the DeepMind preprocessing: uint8 observations ``(84, 84, 4)``.

    The game is created with ``gym.make(env_id, frameskip=1, repeat_action_probability=0.0,
    **env_kwargs)``: ``frameskip=1`` because `MaxAndSkipEnv` skips frames (the ALE's own skip
    would multiply with it and has no max-pooling), and no sticky actions because the DeepMind
    protocol (Nature DQN, IMPALA) has none; pass ``repeat_action_probability=0.25`` for the
    protocol of Machado et al. (2018), the v5 default. With a ``seed`` the env is reset once
    with it and its action space seeded: later unseeded resets are then reproducible.
    ``game_wrappers`` go around the game below the DeepMind wrappers (`wrap_deepmind`).

    Example:
        >>> env = make_atari("ALE/Pong-v5", seed=0)
        >>> obs, _ = env.reset()
        >>> obs.shape, obs.dtype
        ((84, 84, 4), dtype('uint8'))
    """
    register_ale_envs()
    kwargs: dict[str, Any] = {"frameskip": 1, "repeat_action_probability": 0.0, **env_kwargs}
    if kwargs["frameskip"] != 1:
        raise ConfigError(
            f"make_atari: frameskip={kwargs['frameskip']!r} must be 1; frames are skipped "
            "(with max-pooling) by MaxAndSkipEnv"
        )
    env = wrap_deepmind(
        gym.make(env_id, **kwargs),
        episodic_life=episodic_life,
        clip_rewards=clip_rewards,
        frame_stack=frame_stack,
        game_wrappers=game_wrappers,
    )
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env

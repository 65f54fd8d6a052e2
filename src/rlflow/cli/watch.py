"""``rlflow evaluate --render / --video DIR``: the env that evaluation plays on, shown or filmed.

The evaluation env is the run's own (its id, ``env_config`` and ``env_wrappers``) made with a
``render_mode``: ``human`` opens a window (``--render``), ``rgb_array`` feeds gymnasium's
``RecordVideo``, which writes one ``.mp4`` per episode into the video dir (moviepy, the
``video`` extra). ``RecordVideo`` goes around the whole env, except for Atari games (``ALE/``
ids with the DeepMind wrappers): there it wraps the game itself, below the wrappers that end an
episode at each lost life and skip frames, so one video is one whole game at the game's frame
rate (`rlflow.envs.atari.wrap_deepmind`'s ``game_wrappers``).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import gymnasium as gym

from rlflow.envs import EnvCreator, config_env_creator
from rlflow.envs.creator import ALE_PREFIX
from rlflow.errors import ConfigError

__all__ = ["VIDEO_INSTALL", "check_video_support", "check_watch_flags", "evaluation_creator"]

VIDEO_INSTALL = 'pip install "rl-flow[video]"'
"""How to install what ``--video`` needs (moviepy)."""


def check_video_support() -> None:
    """ConfigError naming the ``video`` extra if moviepy cannot be imported."""
    try:
        import moviepy  # noqa: F401
    except ImportError as err:
        raise ConfigError(
            f"evaluate --video: recording needs moviepy, which could not be imported ({err}); "
            f"install the video extra: {VIDEO_INSTALL}"
        ) from None


def check_watch_flags(*, render: bool, video_dir: str | Path | None) -> None:
    """ConfigError if both ``render`` and ``video_dir`` are asked for, or ``video_dir`` is and
    moviepy is missing (`check_video_support`)."""
    if render and video_dir is not None:
        raise ConfigError("evaluate: --render and --video exclude each other; pick one")
    if video_dir is not None:
        check_video_support()


def _record(env: Any, *, folder: Path, prefix: str, num_episodes: int) -> Any:
    """``env`` in a `gymnasium.wrappers.RecordVideo` that films its first ``num_episodes``
    episodes (the evaluation's; not the one the sampler starts after the last)."""
    if not isinstance(env, gym.Env):
        raise ConfigError(
            f"evaluate --video: the env is a {type(env).__name__}, not a gymnasium.Env; videos "
            "are recorded of single-agent Gymnasium envs only"
        )
    return gym.wrappers.RecordVideo(
        env,
        str(folder),
        episode_trigger=lambda episode: episode < num_episodes,
        name_prefix=prefix,
    )


def _wrapped(creator: EnvCreator, record: Any) -> Any:
    return record(creator())


def evaluation_creator(
    config: Any, *, render: bool, video_dir: str | Path | None, num_episodes: int
) -> EnvCreator | None:
    """The env creator for ``Trainer.evaluate(env_creator=...)``: the run's env with
    ``render_mode="human"`` (``render``) or ``"rgb_array"`` filmed into ``video_dir`` (one
    ``<env>-episode-<i>.mp4`` per episode, i from 0); None when neither is asked for.
    Check the flags first with `check_watch_flags` (before any actor starts)."""
    check_watch_flags(render=render, video_dir=video_dir)
    if not render and video_dir is None:
        return None
    env_config = dict(config.env_config)
    env_config["render_mode"] = "human" if render else "rgb_array"
    record = None
    if video_dir is not None:
        prefix = str(config.env).replace("/", "-") if isinstance(config.env, str) else "env"
        record = functools.partial(
            _record, folder=Path(video_dir), prefix=prefix, num_episodes=num_episodes
        )
    atari = isinstance(config.env, str) and config.env.startswith(ALE_PREFIX)
    if record is not None and atari and env_config.get("deepmind", True):
        env_config["game_wrappers"] = (record,)
        record = None
    creator = config_env_creator(dataclasses.replace(config, env_config=env_config))
    return creator if record is None else functools.partial(_wrapped, creator, record)

"""``rlflow evaluate``: --episodes, --seed, --stochastic, --render and --video."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlflow.algorithms import IMPALAConfig, PPOConfig
from rlflow.checkpoint import latest_checkpoint
from rlflow.cli import main
from rlflow.cli.watch import evaluation_creator
from rlflow.envs import VectorEnv
from rlflow.trainer import Trainer

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def run_dir(ppo_run_dir: Path) -> Path:
    return ppo_run_dir


def _evaluate(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    code = main(["evaluate", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_video_writes_one_mp4_per_episode_with_every_frame(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import imageio_ffmpeg

    videos = tmp_path / "videos"
    out = _evaluate(capsys, str(run_dir), "--episodes", "2", "--seed", "1", "--video", str(videos))
    files = sorted(videos.glob("*.mp4"))
    assert [f.name for f in files] == ["CartPole-v1-episode-0.mp4", "CartPole-v1-episode-1.mp4"]
    assert "videos: 2 in" in out
    with Trainer.restore(latest_checkpoint(run_dir), backend="local") as trainer:
        stats = trainer.evaluate(2, seed=1)
    frames = sum(imageio_ffmpeg.count_frames_and_secs(str(f))[0] for f in files)
    assert frames == round(2 * stats["episode_len_mean"]) + 2  # the first frame of each, too


@pytest.mark.parametrize("mode", [[], ["--stochastic"]])
def test_episodes_and_seed_are_reproducible(
    run_dir: Path, capsys: pytest.CaptureFixture[str], mode: list[str]
) -> None:
    args = [str(run_dir), "--episodes", "3", "--seed", "1", *mode]
    first = _evaluate(capsys, *args)
    assert first == _evaluate(capsys, *args)
    assert ("3 stochastic episodes" if mode else "3 greedy episodes") in first


def test_missing_moviepy_names_the_video_extra(
    run_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "moviepy", None)  # as if not installed
    videos = tmp_path / "videos"
    assert main(["evaluate", str(run_dir), "--video", str(videos)]) == 2
    err = capsys.readouterr().err
    assert 'pip install "rl-flow[video]"' in err and "moviepy" in err
    assert not videos.exists()


def test_render_opens_a_human_window(
    run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")  # pygame's window, without a display
    creator = evaluation_creator(
        PPOConfig(env="CartPole-v1"), render=True, video_dir=None, num_episodes=1
    )
    assert creator is not None and creator().render_mode == "human"
    out = _evaluate(capsys, str(run_dir), "--episodes", "1", "--render")
    assert "1 greedy episodes" in out
    assert main(["evaluate", str(run_dir), "--render", "--video", "v"]) == 2


def test_atari_video_films_whole_games_below_the_life_loss_wrapper(tmp_path: Path) -> None:
    config = IMPALAConfig(env="ALE/Breakout-v5")
    videos = tmp_path / "videos"
    creator = evaluation_creator(config, render=False, video_dir=videos, num_episodes=1)
    assert creator is not None
    env = top = creator()
    chain = []
    while isinstance(env, gym.Wrapper):
        chain.append(type(env).__name__)
        env = env.env
    top.close()
    assert chain.index("RecordVideo") == chain.index("RecordGameScore") + 1  # right inside it
    assert chain.index("EpisodicLifeEnv") < chain.index("RecordVideo")
    venv = VectorEnv(creator, 1, seed=0)
    venv.reset()
    rng = np.random.default_rng(0)
    lives_lost = 0
    while not (games := venv.pop_episode_stats()):
        lives_lost += int(venv.step(rng.integers(0, 4, size=1)).terminateds[0])
    venv.close()
    assert len(games) == 1 and lives_lost == 5  # one game over its five lives
    assert [f.name for f in videos.glob("*.mp4")] == ["ALE-Breakout-v5-episode-0.mp4"]

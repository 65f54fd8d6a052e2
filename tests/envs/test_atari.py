"""DeepMind Atari wrappers: exact behaviour on scripted envs, shapes and seeding on real Pong."""

from __future__ import annotations

import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlflow.algorithms import IMPALAConfig, tuned_config
from rlflow.algorithms.impala.policy import VTracePolicy
from rlflow.config.files import tuned_config_path
from rlflow.data.sample_batch import BOOTSTRAP, NEXT_OBS, OBS
from rlflow.envs import make_env_creator
from rlflow.envs.atari import (
    ClipRewardEnv,
    EpisodicLifeEnv,
    FireResetEnv,
    FrameStack,
    MaxAndSkipEnv,
    NoopResetEnv,
    WarpFrame,
    make_atari,
    wrap_deepmind,
)
from rlflow.errors import ConfigError
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)


class _FakeALE:
    """Stands in for ``ale_py.ALEInterface``: only ``lives()``."""

    def __init__(self, env: ScriptedAtari) -> None:
        self.env = env

    def lives(self) -> int:
        return self.env.lives


class ScriptedAtari(gym.Env[np.ndarray, int]):
    """Frame t (frames since reset): pixel (0, 0) = t, pixel (0, 1) = 100 on odd t, reward t.

    Lives start at ``1 + len(lives_lost_at)``; one is lost at each frame in ``lives_lost_at``;
    at frame ``game_len`` lives drop to 0 and the episode terminates.
    """

    def __init__(
        self, *, lives_lost_at: tuple[int, ...] = (), game_len: int = 1000, shape=(6, 4), rgb=True
    ) -> None:
        self.lives_lost_at = lives_lost_at
        self.game_len = game_len
        self.observation_space = spaces.Box(0, 255, (*shape, 3) if rgb else shape, np.uint8)
        self.action_space = spaces.Discrete(4)
        self.ale = _FakeALE(self)
        self.resets = 0
        self.actions: list[int] = []
        self.t = 0
        self.lives = 0

    def get_action_meanings(self) -> list[str]:
        return ["NOOP", "FIRE", "RIGHT", "LEFT"]

    def _frame(self) -> np.ndarray:
        frame = np.zeros(self.observation_space.shape, dtype=np.uint8)
        frame[0, 0] = self.t % 256
        frame[0, 1] = 100 if self.t % 2 else 0
        return frame

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.resets += 1
        self.lives = 1 + len(self.lives_lost_at)
        return self._frame(), {}

    def step(self, action: int):
        self.actions.append(int(action))
        self.t += 1
        if self.t in self.lives_lost_at:
            self.lives -= 1
        terminated = self.t >= self.game_len
        if terminated:
            self.lives = 0
        return self._frame(), float(self.t), terminated, False, {}


class _ImageCounter(gym.Env[np.ndarray, int]):
    """Observation = a (2, 2, 1) uint8 image filled with the step count; reward list scripted."""

    def __init__(self, rewards: tuple[float, ...] = (0.0,)) -> None:
        self.observation_space = spaces.Box(0, 255, (2, 2, 1), np.uint8)
        self.action_space = spaces.Discrete(2)
        self.rewards = rewards
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros((2, 2, 1), np.uint8), {}

    def step(self, action: int):
        self.t += 1
        reward = self.rewards[(self.t - 1) % len(self.rewards)]
        return np.full((2, 2, 1), self.t, np.uint8), reward, False, False, {}


def test_frame_stack_shifts_newest_last() -> None:
    env = FrameStack(_ImageCounter(), k=4)
    obs, _ = env.reset()
    assert obs.shape == (2, 2, 4) and obs.dtype == np.uint8
    assert obs[0, 0].tolist() == [0, 0, 0, 0]
    seen = [env.step(0)[0][0, 0].tolist() for _ in range(5)]
    assert seen == [[0, 0, 0, 1], [0, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5]]
    # Observations are fresh arrays, and a reset refills every slot.
    first, _ = env.reset()
    env.step(0)
    assert first[0, 0].tolist() == [0, 0, 0, 0]


def test_max_and_skip_pools_the_last_two_frames() -> None:
    env = MaxAndSkipEnv(ScriptedAtari(game_len=6, rgb=False), skip=4)
    env.reset()
    obs, reward, terminated, _, _ = env.step(2)
    # Frames 1..4 were played: pixel (0, 0) = max(3, 4); pixel (0, 1) = max(100, 0) from frame 3.
    assert (obs[0, 0], obs[0, 1]) == (4, 100)
    assert reward == 1 + 2 + 3 + 4
    assert not terminated
    # Frames 5 and 6, then the game ends: max over those two only, rewards 5 + 6.
    obs, reward, terminated, _, _ = env.step(2)
    assert (obs[0, 0], obs[0, 1], reward, terminated) == (6, 100, 11.0, True)
    assert env.unwrapped.actions == [2] * 6


def test_clip_rewards_to_sign() -> None:
    env = ClipRewardEnv(_ImageCounter(rewards=(2.5, -3.0, 0.0, 0.2)))
    env.reset()
    assert [env.step(0)[1] for _ in range(4)] == [1.0, -1.0, 0.0, 1.0]


def test_episodic_life_resets_the_game_only_at_game_over() -> None:
    inner = ScriptedAtari(lives_lost_at=(3, 6), game_len=9)
    env = EpisodicLifeEnv(inner)
    env.reset()
    assert (inner.resets, env.lives) == (1, 3)
    flags = [env.step(2)[2] for _ in range(3)]
    assert flags == [False, False, True]  # a life lost at frame 3 ends the learner's episode
    obs, _ = env.reset()
    # No real reset: one NOOP (frame 4) continues the same game.
    assert (inner.resets, inner.t, int(obs[0, 0, 0]), inner.actions[-1]) == (1, 4, 4, 0)
    assert [env.step(2)[2] for _ in range(2)] == [False, True]  # frames 5, 6
    env.reset()  # frame 7
    flags = [env.step(2)[2] for _ in range(2)]  # frames 8, 9: game over
    assert flags == [False, True] and env.was_real_done
    env.reset()
    assert (inner.resets, inner.t, env.lives) == (2, 0, 3)


def test_noop_reset_counts_are_seeded() -> None:
    def noops(seed: int) -> int:
        env = NoopResetEnv(ScriptedAtari(), noop_max=30)
        env.reset(seed=seed)
        return env.unwrapped.t

    counts = [noops(seed) for seed in range(8)]
    assert all(1 <= c <= 30 for c in counts)
    assert counts == [noops(seed) for seed in range(8)]
    assert len(set(counts)) > 1


def test_fire_reset_presses_fire() -> None:
    env = FireResetEnv(ScriptedAtari())
    env.reset()
    assert env.unwrapped.actions == [1, 2]
    with pytest.raises(ConfigError, match="no FIRE action"):
        FireResetEnv(_ImageCounter())


def test_warp_frame_is_area_averaged_luminance() -> None:
    env = WarpFrame(ScriptedAtari(shape=(210, 160)))
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (210, 160, 3), dtype=np.uint8)
    out = env.observation(frame)
    assert out.shape == (84, 84, 1) and out.dtype == np.uint8

    def area_matrix(src: int, dst: int) -> np.ndarray:
        scale = src / dst
        edges = np.arange(dst + 1) * scale
        pixel = np.arange(src)[None, :]
        overlap = np.minimum(pixel + 1, edges[1:, None]) - np.maximum(pixel, edges[:-1, None])
        return np.clip(overlap, 0, None) / scale

    gray = frame.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    expected = area_matrix(210, 84) @ gray @ area_matrix(160, 84).T
    assert np.abs(out[:, :, 0].astype(np.float64) - expected).max() <= 0.5 + 1e-3
    # A flat colour stays flat: rint(0.299 * 10 + 0.587 * 200 + 0.114 * 30) = 124.
    flat = np.broadcast_to(np.array([10, 200, 30], np.uint8), (210, 160, 3))
    assert set(env.observation(flat).ravel().tolist()) == {124}


def test_wrap_deepmind_on_a_scripted_game() -> None:
    env = wrap_deepmind(ScriptedAtari(shape=(210, 160)), noop_max=0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    assert env.observation_space.contains(obs)
    assert env.unwrapped.actions == [1] * 4 + [2] * 4  # FIRE, then action 2, 4 frames each
    obs, reward, *_ = env.step(3)
    assert obs.dtype == np.uint8 and reward == 1.0


def test_make_atari_rejects_frame_skipping_games() -> None:
    pytest.importorskip("ale_py")
    with pytest.raises(ConfigError, match="frameskip=4 must be 1"):
        make_atari("ALE/Pong-v5", frameskip=4)


def test_pong_observations_and_clipped_rewards() -> None:
    pytest.importorskip("ale_py")
    env = make_atari("ALE/Pong-v5", seed=0)
    obs, _ = env.reset()
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    rewards = set()
    for _ in range(200):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
        rewards.add(reward)
        assert not (terminated or truncated)
    assert rewards <= {-1.0, 0.0, 1.0} and len(rewards) > 1
    env.close()


def test_pong_seeding_is_reproducible() -> None:
    pytest.importorskip("ale_py")
    actions = np.random.default_rng(0).integers(0, 6, 20).tolist()

    def rollout(seed: int) -> list[np.ndarray]:
        env = make_atari("ALE/Pong-v5", seed=seed)
        frames = [env.reset()[0]]
        frames += [env.step(a)[0] for a in actions]
        frames.append(env.reset(seed=seed + 1)[0])
        env.close()
        return frames

    first, second = rollout(3), rollout(3)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_ale_ids_make_picklable_deepmind_creators() -> None:
    pytest.importorskip("ale_py")
    creator = pickle.loads(pickle.dumps(make_env_creator("ALE/Pong-v5")))
    env = creator()
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == (84, 84, 4)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    obs, *_ = env.step(0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    env.close()
    raw = make_env_creator("ALE/Pong-v5", deepmind=False)()
    assert raw.observation_space.shape == (210, 160, 3)
    raw.close()
    with pytest.raises(ConfigError, match="ALE/Pong-v5"):
        make_env_creator("ALE/Pongg-v5")


def test_tuned_impala_config_for_pong() -> None:
    assert tuned_config_path("impala", "ALE/Pong-v5") is not None
    config = tuned_config("impala", "ALE/Pong-v5")
    assert config.env == "ALE/Pong-v5" and config.num_workers == 2


@pytest.mark.usefixtures("local_backend")
def test_impala_worker_samples_uint8_pong_frames() -> None:
    pytest.importorskip("ale_py")
    config = IMPALAConfig(
        env="ALE/Pong-v5", num_workers=1, num_envs_per_worker=1, rollout_fragment_length=20
    )
    workers = WorkerSet(config, VTracePolicy)
    try:
        # The local worker (index 0) is the learner; the remote one samples.
        _, batch = workers.foreach_worker(lambda w: w.sample() if w.worker_index else None)
    finally:
        workers.stop()
    # One sequence of 20 steps and its bootstrap row: one frame stack more, not a NEXT_OBS each.
    assert batch[OBS].dtype == np.uint8 and batch[OBS].shape == (21, 84, 84, 4)
    assert batch.env_steps() == 20 and batch[BOOTSTRAP].tolist() == [False] * 20 + [True]
    assert NEXT_OBS not in batch


def test_a_pickled_vector_env_of_atari_games_continues_exactly() -> None:
    # A pickled ALE env has a fresh emulator; VectorEnv saves and restores the emulator state,
    # so a checkpointed worker's episodes (and their return trackers) go on where they were.
    from rlflow.envs import VectorEnv

    venv = VectorEnv(make_env_creator("ALE/Pong-v5"), 2, seed=0)
    venv.reset()
    rng = np.random.default_rng(0)
    for _ in range(30):
        venv.step(rng.integers(0, 6, size=2))
    twin = pickle.loads(pickle.dumps(venv))
    for _ in range(40):
        actions = rng.integers(0, 6, size=2)
        a, b = venv.step(actions), twin.step(actions)
        np.testing.assert_array_equal(a.next_obs, b.next_obs)
        np.testing.assert_array_equal(a.rewards, b.rewards)
    venv.close()
    twin.close()

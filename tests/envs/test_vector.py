"""Tests of make_env_creator, VectorEnv and CountingEnv."""

from __future__ import annotations

import itertools
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from gymnasium import spaces

from rlflow.envs import EpisodeStat, VectorEnv, make_env_creator
from rlflow.envs.records import LOGGED_ACTION
from rlflow.errors import ConfigError, RLFlowError
from rlflow.testing.envs import CountingEnv

pytestmark = pytest.mark.timeout(60)


class EchoActionEnv(gym.Env[npt.NDArray[np.float32], npt.NDArray[np.float32]]):
    """Observation = the action just received, so clipping is visible; never ends."""

    def __init__(self) -> None:
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(
        self, action: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        return np.asarray(action, np.float32), 0.0, False, False, {}


def lengths_creator(*lengths: int) -> Any:
    """A creator whose k-th call builds CountingEnv(lengths[k])."""
    it = iter(lengths)
    return lambda: CountingEnv(next(it))


class LoggingEnv(CountingEnv):
    """CountingEnv whose 'client' took action 1 itself on every even observation."""

    def _logged(self, ob: Any, info: dict[str, Any]) -> dict[str, Any]:
        return {**info, LOGGED_ACTION: 1} if int(np.asarray(ob)[0]) % 2 == 0 else info

    def reset(self, **kwargs: Any) -> Any:
        ob, info = super().reset(**kwargs)
        return ob, self._logged(ob, info)

    def step(self, action: Any) -> Any:
        ob, reward, terminated, truncated, info = super().step(action)
        return ob, reward, terminated, truncated, self._logged(ob, info)


def test_logged_actions_travel_with_the_observations_they_were_taken_for() -> None:
    venv = VectorEnv(lambda: LoggingEnv(episode_len=3), num_envs=2, seed=0)
    venv.reset()
    assert venv.logged_actions == {0: 1, 1: 1}  # observation 0 of both episodes
    step = venv.step(np.zeros(2, np.int64))  # observation 1: none
    assert step.logged_actions == {} and venv.logged_actions == {}
    assert venv.step(np.zeros(2, np.int64)).logged_actions == {0: 1, 1: 1}
    step = venv.step(np.zeros(2, np.int64))  # the episodes end: the new first observations'
    assert step.terminateds.all() and step.logged_actions == {0: 1, 1: 1}


def test_counting_env_autoreset_and_final_obs() -> None:
    venv = VectorEnv(lambda: CountingEnv(episode_len=3), num_envs=2, seed=0)
    assert venv.reset().tolist() == [[0.0], [0.0]]
    zeros = np.zeros(2, np.int64)
    for k in (1, 2):
        step = venv.step(zeros)
        assert step.next_obs.tolist() == [[k], [k]]
        assert step.final_obs.tolist() == [[k], [k]]
        assert step.terminateds.tolist() == [False, False]
    assert venv.pop_episode_stats() == []
    next_obs, rewards, terminateds, truncateds, final_obs, logged = venv.step(zeros)
    assert next_obs.tolist() == [[0.0], [0.0]]  # the new episodes' first observations
    assert final_obs.tolist() == [[3.0], [3.0]]  # the true last observations
    assert rewards.tolist() == [1.0, 1.0]
    assert terminateds.tolist() == [True, True]
    assert truncateds.tolist() == [False, False]
    assert venv.pop_episode_stats() == [EpisodeStat(3.0, 3), EpisodeStat(3.0, 3)]
    assert logged == {}  # no client takes its own actions here
    assert venv.pop_episode_stats() == []
    assert venv.step(zeros).next_obs.tolist() == [[1.0], [1.0]]


def test_episode_stats_across_autoresets_with_different_lengths() -> None:
    venv = VectorEnv(lengths_creator(2, 3), num_envs=2, seed=None)
    venv.reset()
    finished: list[list[bool]] = []
    for _ in range(6):
        step = venv.step(np.zeros(2, np.int64))
        finished.append(step.terminateds.tolist())
        unfinished = ~step.terminateds
        assert np.array_equal(step.final_obs[unfinished], step.next_obs[unfinished])
    # env 0 ends at steps 2, 4, 6; env 1 at steps 3, 6
    assert finished == [
        [False, False],
        [True, False],
        [False, True],
        [True, False],
        [False, False],
        [True, True],
    ]
    assert venv.pop_episode_stats() == [
        EpisodeStat(2.0, 2),
        EpisodeStat(3.0, 3),
        EpisodeStat(2.0, 2),
        EpisodeStat(2.0, 2),
        EpisodeStat(3.0, 3),
    ]


def test_truncation_is_reported_and_autoreset() -> None:
    venv = VectorEnv(lambda: CountingEnv(1, truncate=True), num_envs=1, seed=0)
    venv.reset()
    step = venv.step(np.array([1]))
    assert step.truncateds.tolist() == [True]
    assert step.terminateds.tolist() == [False]
    assert step.final_obs.tolist() == [[1.0]]
    assert step.next_obs.tolist() == [[0.0]]
    assert venv.pop_episode_stats() == [EpisodeStat(1.0, 1)]


def test_reset_drops_episodes_in_progress() -> None:
    venv = VectorEnv(lambda: CountingEnv(3), num_envs=1, seed=0)
    venv.reset()
    venv.step(np.array([0]))
    venv.step(np.array([0]))
    venv.reset()
    for _ in range(3):
        venv.step(np.array([0]))
    assert venv.pop_episode_stats() == [EpisodeStat(3.0, 3)]


def rollout(seed: int, steps: int = 300) -> npt.NDArray[Any]:
    """Observations of a 3-env CartPole run with seeded random actions."""
    venv = VectorEnv(make_env_creator("CartPole-v1"), num_envs=3, seed=seed)
    rng = np.random.default_rng(123)
    trajectory = [venv.reset()]
    for _ in range(steps):
        step = venv.step(rng.integers(0, 2, size=3))
        trajectory.append(step.final_obs)
        trajectory.append(step.next_obs)
    venv.close()
    return np.stack(trajectory)


def test_same_seed_same_trajectory_different_seed_differs() -> None:
    a, b = rollout(7), rollout(7)
    assert np.array_equal(a, b)
    assert not np.array_equal(a[0], rollout(8)[0])
    assert not np.array_equal(a, rollout(8))


def test_sub_env_i_is_seeded_with_seed_plus_i_then_unseeded() -> None:
    venv = VectorEnv(make_env_creator("CartPole-v1"), num_envs=3, seed=10)
    first = venv.reset()
    for i in range(3):
        expected, _ = gym.make("CartPole-v1").reset(seed=10 + i)
        assert np.array_equal(first[i], expected)
    # Later resets continue each sub-env's RNG instead of reseeding: a new first observation.
    second = venv.reset()
    assert not np.array_equal(first, second)


def test_box_actions_are_clipped() -> None:
    venv = VectorEnv(EchoActionEnv, num_envs=2, seed=0)
    venv.reset()
    step = venv.step(np.array([[5.0, -5.0], [0.5, 0.0]]))
    assert step.next_obs.tolist() == [[1.0, -1.0], [0.5, 0.0]]


def test_wrong_action_shape_is_rejected() -> None:
    venv = VectorEnv(lambda: CountingEnv(3), num_envs=2, seed=0)
    venv.reset()
    with pytest.raises(ConfigError, match=r"actions have shape \(3,\), expected \(2,\)"):
        venv.step(np.zeros(3, np.int64))


def test_copy_false_returns_internal_buffers() -> None:
    venv = VectorEnv(lambda: CountingEnv(5), num_envs=1, seed=0)
    venv.reset()
    kept = venv.step(np.array([0]), copy=False).next_obs
    copied = venv.step(np.array([0])).next_obs
    assert kept.tolist() == [[2.0]]  # overwritten in place by the second step
    venv.step(np.array([0]))
    assert copied.tolist() == [[2.0]]  # a copy is not


def test_misuse_and_bad_arguments() -> None:
    venv = VectorEnv(lambda: CountingEnv(3), num_envs=1, seed=0)
    with pytest.raises(RLFlowError, match="before reset"):
        venv.step(np.array([0]))
    venv.close()
    venv.close()  # idempotent
    with pytest.raises(RLFlowError, match="after close"):
        venv.reset()
    with pytest.raises(ConfigError, match=r"num_envs=0 must be an int(eger)? >= 1"):
        VectorEnv(lambda: CountingEnv(3), num_envs=0, seed=0)
    with pytest.raises(ConfigError, match=r"seed=-1 must be (None or )?an int(eger)? >= 0"):
        VectorEnv(lambda: CountingEnv(3), num_envs=1, seed=-1)


def test_unsupported_space_is_rejected() -> None:
    class DictObsEnv(CountingEnv):
        def __init__(self) -> None:
            super().__init__(3)
            self.observation_space = spaces.Dict({"x": spaces.Discrete(2)})  # type: ignore[assignment]

    with pytest.raises(ConfigError, match="observation space Dict"):
        VectorEnv(DictObsEnv, num_envs=1, seed=0)


def test_spaces_are_the_single_envs() -> None:
    with VectorEnv(make_env_creator("CartPole-v1"), num_envs=4, seed=0) as venv:
        assert venv.num_envs == 4
        assert venv.observation_space.shape == (4,)
        assert venv.action_space == spaces.Discrete(2)
        assert venv.reset().shape == (4, 4)


def test_unknown_env_id_suggests_close_ids() -> None:
    with pytest.raises(ConfigError, match=r"'CartPol-v1'; did you mean 'CartPole-v1'"):
        make_env_creator("CartPol-v1")
    # "CartPole-v0" is itself registered in gymnasium, so a wrong version number is the typo.
    with pytest.raises(ConfigError, match=r"unknown Gymnasium env id 'CartPole-v9'.*'CartPole-v1'"):
        make_env_creator("CartPole-v9")
    with pytest.raises(ConfigError, match="pprint_registry"):
        make_env_creator("zzzzzzzzzz")
    with pytest.raises(ConfigError, match="module 'no_such_module_xyz'"):
        make_env_creator("no_such_module_xyz:Foo-v0")


def test_env_creator_kwargs_and_callables() -> None:
    creator = make_env_creator("CartPole-v1", max_episode_steps=5)
    venv = VectorEnv(creator, num_envs=1, seed=0)
    venv.reset()
    for _ in range(5):
        step = venv.step(np.array([0]))
    # Pushing left for 5 steps does not topple the pole yet: the time limit cuts the episode.
    assert step.truncateds.tolist() == [True]
    assert step.terminateds.tolist() == [False]
    assert venv.pop_episode_stats() == [EpisodeStat(5.0, 5)]
    assert pickle.loads(pickle.dumps(creator))().spec.max_episode_steps == 5  # type: ignore[union-attr]
    env = make_env_creator(CountingEnv, episode_len=2)()
    assert isinstance(env, CountingEnv) and env.episode_len == 2
    assert make_env_creator(CountingEnv) is CountingEnv
    with pytest.raises(ConfigError, match="got an env instance"):
        make_env_creator(CountingEnv())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"env=3 .* must be a Gymnasium id string or a callable"):
        make_env_creator(3)  # type: ignore[arg-type]


def test_counting_env_values() -> None:
    env = CountingEnv(episode_len=2)
    obs, _ = env.reset(seed=1)
    assert obs.dtype == np.float32 and obs.tolist() == [0.0]
    results = [env.step(np.int64(0))[:4] for _ in range(2)]
    assert [(o.tolist(), r, te, tr) for o, r, te, tr in results] == [
        ([1.0], 1.0, False, False),
        ([2.0], 1.0, True, False),
    ]
    with pytest.raises(ConfigError, match="episode_len=0"):
        CountingEnv(0)


def test_many_steps_have_exact_stats() -> None:
    venv = VectorEnv(lengths_creator(4, 5, 6), num_envs=3, seed=0)
    venv.reset()
    for _ in range(60):
        venv.step(np.zeros(3, np.int64))
    stats = venv.pop_episode_stats()
    counts = {n: sum(1 for s in stats if s.length == n) for n in (4, 5, 6)}
    assert counts == {4: 15, 5: 12, 6: 10}
    assert all(s.return_ == float(s.length) for s in stats)
    assert list(itertools.islice((s.length for s in stats), 3)) == [4, 5, 6]

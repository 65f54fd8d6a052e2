"""Env faults and env validation in `VectorEnv` (issue 11 parts 3 and 10): a sub-env that raises
is rebuilt in place (or named in the error), observations are checked on the first steps."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from gymnasium import spaces

from rlflow.envs import CARTPOLE_CRASHING_ID, EpisodeStat, VectorEnv, make_env_creator
from rlflow.envs.crashing import CrashingEnv, EnvCrashError
from rlflow.envs.validation import MAX_RESTART_ATTEMPTS, OBS_CHECK_STEPS, restart_seed
from rlflow.errors import ConfigError
from rlflow.testing.envs import CountingEnv

pytestmark = pytest.mark.timeout(60)

Array = npt.NDArray[Any]
ZEROS = np.zeros(2, np.int64)


def scripted_creator(*wrappers: dict[str, Any] | None, episode_len: int = 5) -> Callable[[], Any]:
    """The k-th call builds CountingEnv(episode_len) in CrashingEnv(**wrappers[k]) (plain
    when None or past the end), so tests say which env instance crashes when."""
    calls = iter(wrappers)

    def make() -> gym.Env[Any, Any]:
        env = CountingEnv(episode_len)
        kwargs = next(calls, None)
        return env if kwargs is None else CrashingEnv(env, **kwargs)

    return make


class SeedLog(CountingEnv):
    """CountingEnv that records the seed of every reset (class-wide, in order)."""

    seeds: ClassVar[list[int | None]] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Array, dict[str, Any]]:
        SeedLog.seeds.append(seed)
        return super().reset(seed=seed, options=options)


class BadObsEnv(gym.Env[Array, int]):
    """Observation space Box(-1, 1, (4,)); from step ``bad_from`` on (0: the reset), the
    observation is ``bad`` instead of zeros(4)."""

    def __init__(self, bad: Any = None, bad_from: int = 0) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.bad = np.zeros(5, np.float32) if bad is None else bad
        self.bad_from = bad_from
        self.t = 0

    def _ob(self) -> Any:
        return self.bad if self.t >= self.bad_from else np.zeros(4, np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self.t = 0
        return self._ob(), {}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._ob(), 1.0, False, False, {}


# ----------------------------------------------------------------------------- the test env
def test_crashing_env_is_registered_seeded_and_crashes_at_rate_p() -> None:
    def crash_steps(seed: int) -> list[int]:
        env = make_env_creator(CARTPOLE_CRASHING_ID, p_crash=0.05)()
        env.reset(seed=seed)
        out = []
        for k in range(1, 2001):
            try:
                _, _, term, trunc, _ = env.step(0)
            except EnvCrashError:
                out.append(k)
                env.reset()
                continue
            if term or trunc:
                env.reset()
        return out

    first = crash_steps(3)
    assert first == crash_steps(3) != crash_steps(4)
    assert 50 <= len(first) <= 150  # about 0.05 * 2000
    env = gym.make(CARTPOLE_CRASHING_ID, p_crash_reset=1.0)
    with pytest.raises(EnvCrashError, match="reset 1"):
        env.reset(seed=0)


def test_crashing_env_checks_its_probabilities() -> None:
    with pytest.raises(ConfigError, match="p_crash"):
        CrashingEnv(CountingEnv(), p_crash=1.5)


# ----------------------------------------------------------------------------- restarts off
def test_step_error_names_env_worker_and_sub_env_and_keeps_its_type() -> None:
    creator = scripted_creator(None, {"crash_on_steps": (2,)})
    venv = VectorEnv(creator, 2, seed=0, env_id="Counting-v0", worker_index=3)
    venv.reset()
    venv.step(ZEROS)
    with pytest.raises(EnvCrashError, match="step 2") as info:
        venv.step(ZEROS)
    assert "raised by env 'Counting-v0', rollout worker 3, sub-env 1, in step()" in (
        info.value.__notes__
    )


def test_reset_error_names_the_sub_env() -> None:
    venv = VectorEnv(scripted_creator({"crash_on_resets": (1,)}), 1, seed=0)
    with pytest.raises(EnvCrashError) as info:
        venv.reset()
    assert info.value.__notes__ == ["raised by env 'CrashingEnv', sub-env 0, in reset()"]


# ----------------------------------------------------------------------------- restarts on
def test_step_crash_rebuilds_the_sub_env_and_drops_its_episode() -> None:
    creator = scripted_creator(None, {"crash_on_steps": (3,)})
    venv = VectorEnv(creator, 2, seed=0, restart_failed=True)
    venv.reset()
    for _ in range(2):
        venv.step(ZEROS)
        assert venv.restarted == []
    step = venv.step(ZEROS)
    assert venv.restarted == [1] and venv.num_restarts == 1
    assert step.rewards.tolist() == [1.0, 0.0]
    assert step.truncateds.tolist() == [False, True]
    assert step.terminateds.tolist() == [False, False]
    assert step.final_obs.tolist() == [[3.0], [2.0]]  # sub-env 1: the obs it acted on
    assert step.next_obs.tolist() == [[3.0], [0.0]]  # sub-env 1: the rebuilt env's first obs
    for _ in range(7):
        venv.step(ZEROS)
        assert venv.restarted == []
    # sub-env 0: episodes end at steps 5 and 10; sub-env 1's new episode ends at step 8; the
    # 3-step episode that crashed is not reported.
    assert venv.pop_episode_stats() == [EpisodeStat(5.0, 5)] * 3
    assert venv.num_restarts == 1


def test_reset_crash_rebuilds_the_sub_env() -> None:
    # Sub-env 0's first env fails its first reset; sub-env 1's fails the reset after its
    # first episode, which ended normally and is reported (no row is dropped).
    creator = scripted_creator({"crash_on_resets": (1,)}, {"crash_on_resets": (2,)})
    venv = VectorEnv(creator, 2, seed=0, restart_failed=True)
    assert venv.reset().tolist() == [[0.0], [0.0]]
    assert venv.num_restarts == 1
    for _ in range(4):
        venv.step(ZEROS)
    step = venv.step(ZEROS)
    assert venv.num_restarts == 2 and venv.restarted == []
    assert step.terminateds.tolist() == [True, True]
    assert step.next_obs.tolist() == [[0.0], [0.0]]
    assert venv.pop_episode_stats() == [EpisodeStat(5.0, 5)] * 2


def test_rebuilt_env_is_reset_with_a_seed_derived_from_seed_index_and_count() -> None:
    SeedLog.seeds = []
    built = iter(range(100))

    def creator() -> gym.Env[Any, Any]:
        env = SeedLog(5)
        return CrashingEnv(env, crash_on_steps=(1,)) if next(built) == 1 else env

    venv = VectorEnv(creator, 2, seed=7, restart_failed=True)
    venv.reset()
    venv.step(ZEROS)
    assert venv.restarted == [1]
    assert SeedLog.seeds == [7, 8, restart_seed(7, 1, 1)]
    assert restart_seed(None, 1, 1) is None


def test_env_that_always_fails_its_reset_gives_up_after_max_attempts() -> None:
    venv = VectorEnv(
        lambda: CrashingEnv(CountingEnv(), p_crash_reset=1.0), 1, seed=0, restart_failed=True
    )
    with pytest.raises(EnvCrashError) as info:
        venv.reset()
    assert f"rebuilt {MAX_RESTART_ATTEMPTS} times" in info.value.__notes__[-1]
    assert venv.num_restarts == 0


def test_config_errors_are_never_absorbed_by_restarts() -> None:
    venv = VectorEnv(BadObsEnv, 1, seed=0, restart_failed=True, env_id="Bad-v0")
    with pytest.raises(ConfigError, match="Bad-v0"):
        venv.reset()
    assert venv.num_restarts == 0


def test_pickled_vector_env_drops_its_creator_and_keeps_counts() -> None:
    venv = VectorEnv(scripted_creator({"crash_on_steps": (1,)}), 1, seed=0, restart_failed=True)
    venv.reset()
    venv.step(np.zeros(1, np.int64))
    twin = pickle.loads(pickle.dumps(venv))
    assert twin.creator is None and twin.num_restarts == 1 and twin.restart_failed


# ----------------------------------------------------------------------------- validation
def test_wrong_observation_shape_is_a_config_error_naming_env_expected_and_got() -> None:
    venv = VectorEnv(BadObsEnv, 2, seed=0, env_id="Bad-v0", worker_index=1)
    with pytest.raises(ConfigError) as info:
        venv.reset()
    message = str(info.value)
    assert "env 'Bad-v0', rollout worker 1, sub-env 0, reset()" in message
    assert "shape (5,), expected shape (4,)" in message
    assert "could not broadcast" not in message


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (np.zeros(5, np.float32), "shape (5,)"),
        (np.zeros(4, np.complex64), "dtype complex64"),
        (np.full(4, 2.0, np.float32), "outside the bounds"),
    ],
)
def test_observations_of_the_first_steps_are_checked(bad: Array, problem: str) -> None:
    venv = VectorEnv(lambda: BadObsEnv(bad, bad_from=OBS_CHECK_STEPS), 1, seed=0)
    venv.reset()
    for _ in range(OBS_CHECK_STEPS - 1):
        venv.step(np.zeros(1, np.int64))
    with pytest.raises(ConfigError, match="step\\(\\): observation has") as info:
        venv.step(np.zeros(1, np.int64))
    assert problem in str(info.value)


def test_nonfinite_observations_are_left_to_the_samplers_check() -> None:
    # NaN is no bounds mismatch: on_nonfinite decides (rlflow.envs.nonfinite), in the sampler.
    bad = np.array([np.nan, np.inf, 0.0, 0.0], np.float32)
    venv = VectorEnv(lambda: BadObsEnv(bad, bad_from=1), 1, seed=0)
    venv.reset()
    step = venv.step(np.zeros(1, np.int64))
    assert np.isnan(step.next_obs[0, 0]) and np.isinf(step.next_obs[0, 1])


def test_observations_are_not_checked_after_the_first_steps() -> None:
    bad = np.full(4, 2.0, np.float32)  # out of bounds only: it still fits the buffer
    venv = VectorEnv(lambda: BadObsEnv(bad, bad_from=OBS_CHECK_STEPS + 1), 1, seed=0)
    venv.reset()
    for _ in range(OBS_CHECK_STEPS + 2):
        step = venv.step(np.zeros(1, np.int64))
    assert step.next_obs.tolist() == [[2.0] * 4]


def test_float64_observations_of_a_float32_space_pass() -> None:
    venv = VectorEnv(lambda: BadObsEnv(np.zeros(4, np.float64)), 1, seed=0)
    assert venv.reset().dtype == np.float32

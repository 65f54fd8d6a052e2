"""Env API checks (issue 23 part 3): an env that does not follow the Gymnasium API is a
`ConfigError` naming the env, the call and what it returned, through the paths users take."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import rlflow
from rlflow.algorithms import PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.envs import VectorEnv, make_env_creator
from rlflow.envs.validation import OBS_CHECK_STEPS, check_returned
from rlflow.errors import ConfigError
from rlflow.testing.workers import COUNTING_DEFAULTS
from rlflow.workers import RolloutWorker

pytestmark = pytest.mark.timeout(60)

OBS = np.zeros(2, np.float32)
FIX = "Gymnasium.*check_env.*shimmy.*GymV21CompatibilityV0.*GymV26CompatibilityV0"
"""What every refusal ends with: the API, the checker and the compatibility wrappers."""
WORKER = {k: v for k, v in COUNTING_DEFAULTS.items() if k not in ("env", "env_config")}
"""Rollout worker fields: one env, 4-step fragments, a small net."""
TINY = WORKER | {"num_workers": 0, "train_batch_size": 8, "sgd_minibatch_size": 8}
"""A PPO run of 8-step rounds sampled by the learner's worker."""


class GymnasiumEnv(gym.Env[Any, Any]):
    """A correct Gymnasium env: 2-float observations, 2 actions, 3-step episodes."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self.t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return OBS, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return OBS, 1.0, self.t >= 3, False, {}


class OldGymEnv(GymnasiumEnv):
    """The old Gym API: reset returns the observation alone, step 4 values."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return super().reset(seed=seed)[0]

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


class OldStepEnv(GymnasiumEnv):
    """A Gymnasium reset, an old Gym step (4 values)."""

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


class ListInfoEnv(GymnasiumEnv):
    """reset returns (obs, info) with an info that is not a dict."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return OBS, []


class NoActionSpaceEnv(gym.Env[Any, Any]):
    """No action_space at all."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)


class OldSpaceEnv(GymnasiumEnv):
    """An action space that is not a gymnasium space (like an old ``gym.spaces.Discrete``)."""

    action_space = "Discrete(2)"  # type: ignore[assignment]


class NoSeedEnv(GymnasiumEnv):
    """Gym 0.21's reset: no seed argument."""

    def reset(self) -> Any:  # type: ignore[override]
        return super().reset()


REFUSED_AT_FIRST_CALL = [
    (OldGymEnv, r"sub-env 0: reset\(\) returned a single ndarray, expected 2 values \(obs, info\)"),
    (OldStepEnv, r"sub-env 0: step\(\) returned 4 values, expected 5 values \(obs, reward, "),
    (ListInfoEnv, r"sub-env 0: reset\(\) returned 2 values with an info of type list, not a"),
]
"""Envs whose first reset or step shows the problem, and the message after the env's name."""
REFUSED_UNSTEPPED = [
    (NoActionSpaceEnv, r" has no action_space; "),
    (OldSpaceEnv, r": action_space is a builtins\.str, not a gymnasium\.spaces\.Space; "),
    (NoSeedEnv, r": reset\(\) takes no seed argument; "),
]
"""Envs refused on the probe env, before any call, and the message after the env's name."""


@pytest.mark.parametrize("engine", ["rlflow", "gymnasium-sync", "gymnasium-async"])
@pytest.mark.parametrize(("env", "match"), REFUSED_AT_FIRST_CALL)
def test_trainer_resets_and_steps_the_probe_env_before_any_actor(
    engine: str, env: type, match: str
) -> None:
    # The learner's worker (built first) resets and steps its probe env once, whatever engine
    # will step the envs: no actor starts, and the message names no sub-env.
    call = match.split(": ", 1)[1]
    fields = TINY | {"num_workers": 1, "vector_env": engine}
    with pytest.raises(ConfigError, match=f"^env '{env.__name__}': {call}.*{FIX}"):
        rlflow.Trainer("ppo", env=env, backend="local", **fields)


@pytest.mark.parametrize(("env", "match"), REFUSED_UNSTEPPED)
def test_trainer_refuses_env_before_any_actor(env: type, match: str) -> None:
    # Seen on the learner's probe env, so the Trainer is never built.
    with pytest.raises(ConfigError, match=f"^env '{env.__name__}'{match}.*{FIX}"):
        rlflow.Trainer("ppo", env=env, backend="local", **TINY)


@pytest.mark.parametrize(("env", "match"), REFUSED_AT_FIRST_CALL)
def test_a_rollout_workers_first_calls_are_checked(env: type, match: str) -> None:
    # A remote worker (index >= 1) does not step its probe: its sub-envs' first calls show it.
    worker = RolloutWorker(PGConfig(**WORKER, env=env), PGPolicy, worker_index=1)
    try:
        with pytest.raises(
            ConfigError, match=f"env '{env.__name__}', rollout worker 1, {match}.*{FIX}"
        ):
            worker.sample()
    finally:
        worker.stop()


@pytest.mark.parametrize(("env", "match"), REFUSED_AT_FIRST_CALL + REFUSED_UNSTEPPED)
def test_vector_env_from_creator_refuses(env: type, match: str) -> None:
    creator = make_env_creator(env)
    refused = pytest.raises(ConfigError, match=f"env '{env.__name__}'.*{match}.*{FIX}")
    with refused, VectorEnv(creator, num_envs=2, seed=0) as venv:
        venv.reset()
        venv.step(np.zeros(2, np.int64))


def test_step_is_checked_in_the_first_steps_only() -> None:
    # An env that turns to the old step API later is not seen: the check costs nothing then.
    class LateOldStep(GymnasiumEnv):
        calls = 0

        def step(self, action: Any) -> Any:
            LateOldStep.calls += 1
            result = super().step(action)
            return result[:4] if LateOldStep.calls > OBS_CHECK_STEPS else result

    with VectorEnv(LateOldStep, num_envs=1, seed=0) as venv:
        venv.reset()
        for _ in range(OBS_CHECK_STEPS):
            venv.step(np.zeros(1, np.int64))
        with pytest.raises(ValueError, match="not enough values to unpack") as info:
            venv.step(np.zeros(1, np.int64))
    assert not isinstance(info.value, ConfigError)
    assert info.value.__notes__ == ["raised by env 'LateOldStep', sub-env 0, in step()"]


def test_gymnasium_envs_pass() -> None:
    with VectorEnv(make_env_creator("CartPole-v1"), num_envs=2, seed=0) as venv:
        venv.reset()
        for _ in range(OBS_CHECK_STEPS + 1):
            assert venv.step(np.zeros(2, np.int64)).rewards.tolist() == [1.0, 1.0]
    worker = RolloutWorker(PGConfig(**WORKER, env=GymnasiumEnv), PGPolicy, worker_index=0)
    try:
        assert worker.sample().count == WORKER["rollout_fragment_length"]
    finally:
        worker.stop()


@pytest.mark.parametrize(
    ("result", "method", "message"),
    [
        ((OBS, {}), "reset", None),
        ((OBS, 0.0, False, False, {}), "step", None),
        (OBS, "reset", "reset() returned a single ndarray, expected 2 values (obs, info); "),
        ((OBS, {}, {}), "reset", "reset() returned 3 values, expected 2 values (obs, info); "),
        ([OBS, {}], "reset", "reset() returned a single list, expected 2 values (obs, info); "),
        (
            (OBS, 0.0, False, False, None),
            "step",
            "step() returned 5 values with an info of type NoneType, not a dict, expected 5 "
            "values (obs, reward, terminated, truncated, info); ",
        ),
    ],
)
def test_check_returned(result: Any, method: str, message: str | None) -> None:
    if message is None:
        check_returned(result, method, where="env 'X'")
        return
    with pytest.raises(ConfigError) as info:
        check_returned(result, method, where="env 'X'")
    assert str(info.value).startswith(f"env 'X': {message}a Gymnasium env's ")


class OldMultiAgentEnv(rlflow.envs.multi_agent.MultiAgentEnv):
    """A multi-agent env whose reset returns the observations alone."""

    def __init__(self) -> None:
        self.possible_agents = ["a", "b"]
        self.agents = ["a", "b"]
        self.observation_spaces = dict.fromkeys(
            self.possible_agents, GymnasiumEnv.observation_space
        )
        self.action_spaces = dict.fromkeys(self.possible_agents, GymnasiumEnv.action_space)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return {"a": OBS, "b": OBS}

    def step(self, action_dict: Any) -> Any:
        raise AssertionError("never stepped: its reset is refused")


def test_multi_agent_envs_are_checked_at_their_first_reset() -> None:
    config = PGConfig(**WORKER, env=OldMultiAgentEnv, policies={"p": rlflow.config.PolicySpec()})
    worker = RolloutWorker(config, PGPolicy, worker_index=2)
    match = r"env 'OldMultiAgentEnv', rollout worker 2, env 0: reset\(\) returned a single dict"
    with pytest.raises(ConfigError, match=f"{match}.*{FIX}"):
        worker.sample()

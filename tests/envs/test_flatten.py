"""Flattened observations (rlflow.envs.flatten) and the env creator that applies them."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlflow.algorithms.ppo.config import PPOConfig
from rlflow.envs import config_env_creator
from rlflow.envs.flatten import (
    FlattenMultiAgentObservations,
    FlattenObservations,
    ObservationFlattener,
    flatten_observation,
    flatten_space,
    needs_flattening,
    unflattenable_part,
)
from rlflow.envs.targets import (
    DictTargetEnv,
    MultiAgentDictTargetEnv,
    MultiDiscreteTargetEnv,
    TupleTargetEnv,
)
from rlflow.envs.validation import env_name
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(60)

NESTED = spaces.Dict(
    {
        "pos": spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 2.0], np.float32)),
        "door": spaces.Discrete(3, start=1),
        "more": spaces.Tuple((spaces.MultiDiscrete([2, 3]), spaces.MultiBinary(2))),
    }
)


def test_nested_dict_layout_is_exact() -> None:
    # gymnasium sorts a Dict's keys: door, more, pos.
    obs = {"pos": np.array([0.5, 1.5]), "door": 3, "more": (np.array([1, 2]), np.array([1, 0]))}
    flat = flatten_observation(NESTED, obs)
    door, multi, bits, pos = [0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0, 1.0], [1.0, 0.0], [0.5, 1.5]
    assert flat.tolist() == door + multi + bits + pos
    assert flat.dtype == np.float32


def test_flat_space_bounds_follow_the_parts() -> None:
    box = flatten_space(NESTED)
    assert box.shape == (12,) and box.dtype == np.float32
    assert box.low.tolist() == [0.0] * 10 + [-1.0, 0.0]
    assert box.high.tolist() == [1.0] * 10 + [1.0, 2.0]
    sample = NESTED.sample()
    assert box.contains(flatten_observation(NESTED, sample))


def test_tuple_and_top_level_multi_discrete() -> None:
    space = spaces.Tuple((spaces.Discrete(2), spaces.Box(-1, 1, (2, 2), np.float32)))
    flat = flatten_observation(space, (1, np.array([[1.0, 2.0], [3.0, 4.0]])))
    assert flat.tolist() == [0.0, 1.0, 1.0, 2.0, 3.0, 4.0]
    top = spaces.MultiDiscrete([3, 2])
    assert flatten_observation(top, np.array([2, 0])).tolist() == [0.0, 0.0, 1.0, 1.0, 0.0]


def test_what_is_flattened_and_what_is_not() -> None:
    assert needs_flattening(NESTED) and needs_flattening(spaces.MultiBinary(3))
    assert not needs_flattening(spaces.Box(-1, 1, (3,)))
    assert not needs_flattening(spaces.Discrete(3))
    with_text = spaces.Dict({"a": spaces.Tuple((spaces.Discrete(2), spaces.Text(5)))})
    assert not needs_flattening(with_text)
    where, part = unflattenable_part(with_text)  # type: ignore[misc]
    assert where == "['a'][1]" and isinstance(part, spaces.Text)
    with pytest.raises(ConfigError, match=r"cannot flatten observation space part Text"):
        ObservationFlattener(with_text)


def test_an_observation_that_does_not_fit_names_the_part() -> None:
    flattener = ObservationFlattener(NESTED)
    with pytest.raises(ConfigError) as info:
        flattener({"pos": np.zeros(2), "door": 1})  # "more" missing
    assert "('more', 0)" in str(info.value) and "FlattenObservations" in str(info.value)
    obs = {"pos": np.zeros(2), "door": 0, "more": (np.array([1, 2]), np.array([1, 0]))}
    with pytest.raises(ConfigError, match=r"part \('door',\).*value \[0\] outside"):
        flattener(obs)  # Discrete(3, start=1) takes 1, 2, 3
    obs = {**obs, "door": 1, "more": (np.array([1, 3]), np.array([1, 0]))}
    with pytest.raises(ConfigError, match=r"part \('more', 0\).*value \[1, 3\] outside"):
        flattener(obs)


def test_wrapper_flattens_every_step() -> None:
    env = FlattenObservations(DictTargetEnv(n=3))
    obs, _ = env.reset(seed=0)
    # Keys in sorted order: extra (MultiBinary(2), Box(1)), noise (Box(2)), target (one-hot 3).
    assert env.observation_space.shape == (2 + 1 + 2 + 3,) == obs.shape
    assert obs[5:8].sum() == 1.0
    target = int(np.argmax(obs[5:8]))
    assert target == env.unwrapped.targets[0]  # type: ignore[attr-defined]
    next_obs, reward, *_ = env.step(target)
    assert reward == 1.0
    _, reward, *_ = env.step((int(np.argmax(next_obs[5:8])) + 1) % 3)
    assert reward == 0.0


@pytest.mark.parametrize(
    ("env", "size"),
    [(DictTargetEnv, 8), (TupleTargetEnv, 2 + 3 + 3), ("CartPole-v1", 4)],
)
def test_config_env_creator_flattens_structured_observations(env: Any, size: int) -> None:
    made = config_env_creator(PPOConfig(env=env, num_workers=0))()
    assert made.observation_space.shape == (size,)
    assert isinstance(made, FlattenObservations) == (env != "CartPole-v1")
    assert made.observation_space.contains(made.reset(seed=0)[0])


def test_creator_leaves_box_envs_and_unflattenable_spaces_alone() -> None:
    md = config_env_creator(PPOConfig(env=MultiDiscreteTargetEnv, num_workers=0))()
    assert not isinstance(md, FlattenObservations)  # its observations are a Box already

    class TextObs(gym.Env[Any, Any]):
        observation_space = spaces.Dict({"t": spaces.Text(3)})
        action_space = spaces.Discrete(2)

    assert not isinstance(config_env_creator(PPOConfig(env=TextObs))(), FlattenObservations)


def test_env_name_sees_through_the_creator() -> None:
    assert env_name(config_env_creator(PPOConfig(env="CartPole-v1"))) == "CartPole-v1"
    assert env_name(gym.make("CartPole-v1")) == "CartPole-v1"


def test_multi_agent_envs_get_each_agent_flattened() -> None:
    env = config_env_creator(PPOConfig(env=MultiAgentDictTargetEnv))()
    assert isinstance(env, FlattenMultiAgentObservations)
    assert {a: s.shape for a, s in env.observation_spaces.items()} == {"a": (8,), "b": (8,)}
    obs, _ = env.reset(seed=0)
    right = {a: int(np.argmax(o[5:8])) for a, o in obs.items()}
    step = env.step(right)
    assert step.rewards == {"a": 1.0, "b": 1.0} and step.obs["a"].shape == (8,)
    assert env.agents == ["a", "b"]
    plain = config_env_creator(PPOConfig(env="multi_cartpole"))()
    assert not isinstance(plain, FlattenMultiAgentObservations)

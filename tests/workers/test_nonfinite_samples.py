"""NaN and infinite rewards and observations, caught by the samplers where they enter
(``on_nonfinite``, issue 23 part 4)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlflow.algorithms import PGConfig, PPOConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.config import PolicySpec
from rlflow.data import AGENT_INDEX, OBS, REWARDS, TERMINATEDS, TRUNCATEDS, VALUE_TARGETS
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentEnv, MultiAgentStep
from rlflow.envs.nonfinite import all_finite
from rlflow.errors import ConfigError, NonFiniteError
from rlflow.testing.envs import CountingEnv, NonFiniteSteps
from rlflow.workers import RolloutWorker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def counting(**kwargs: Any) -> gym.Env[Any, Any]:
    """`CountingEnv` (episodes of 5 steps, observation = step) under `NonFiniteSteps`."""
    return NonFiniteSteps(CountingEnv(episode_len=5), **kwargs)


def worker(env: Any, *, index: int = 1, **config: Any) -> RolloutWorker:
    base = {
        "env": env,
        "num_workers": 0,
        "rollout_fragment_length": 10,
        "model": {"hidden": (4,)},
        "use_gae": False,
    }
    return RolloutWorker(PGConfig(**{**base, **config}), PGPolicy, worker_index=index)


# ----------------------------------------------------------------------------- raise (default)
@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [("reward", float("nan"), "reward (nan)"), ("observation", float("inf"), "observation (inf)")],
)
def test_a_nonfinite_value_is_an_error_naming_env_worker_sub_env_step_and_field(
    field: str, value: float, shown: str
) -> None:
    env = functools.partial(counting, at_steps=[8], field=field, value=value)
    w = worker(env, index=3, num_envs_per_worker=2)
    with pytest.raises(NonFiniteError) as info:
        w.sample()
    message = str(info.value)
    # Step 8 of the env's life is step 3 of its second episode (episodes of 5 steps).
    assert message.startswith(
        f"env 'NonFiniteSteps', rollout worker 3, sub-env 0: returned a non-finite {shown} at "
        "step 3 of its episode"
    )
    assert "on_nonfinite='skip'" in message


def test_a_nonfinite_first_observation_is_an_error() -> None:
    class NaNReset(CountingEnv):
        def reset(self, **kwargs: Any) -> Any:
            obs, info = super().reset(**kwargs)
            return np.full_like(obs, np.nan), info

    w = worker(NaNReset)
    with pytest.raises(NonFiniteError, match=r"sub-env 0: returned a non-finite observation of"):
        w.sample()


# ----------------------------------------------------------------------------- skip
def test_skip_drops_the_episode_cuts_its_rows_and_counts_it() -> None:
    # Sub-env 0 turns its reward NaN at its 3rd step, sub-env 1 never (each env is wrapped
    # anew; the worker's probe env is built first, so the creator counts from there).
    built = itertools.count()

    def creator() -> gym.Env[Any, Any]:
        return counting(at_steps=[3] if next(built) == 1 else [])

    w = worker(creator, num_envs_per_worker=2, on_nonfinite="skip", gamma=0.5)
    batch = w.sample()
    assert all_finite(batch[REWARDS]) and all_finite(batch[VALUE_TARGETS])
    env0 = batch[OBS][:9, 0].tolist()  # rows are ordered by sub-env, then time
    # Rows 0-1 of episode 1 (the bad step 2 is gone, row 1 ends as a truncation), then a new
    # episode from a reset: 5 steps and the first 2 of the next one.
    assert env0 == [0, 1, 0, 1, 2, 3, 4, 0, 1]
    assert batch[TRUNCATEDS][:9].tolist() == [False, True] + [False] * 7
    assert batch[TERMINATEDS][:9].tolist() == [False] * 6 + [True, False, False]
    assert batch[OBS][9:, 0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]
    assert batch.count == 19
    episodes = w.pop_episode_stats()  # the dropped episode is not reported
    assert [(e.return_, e.length) for e in episodes] == [(5.0, 5), (5.0, 5), (5.0, 5)]
    metrics = w.pop_metrics()
    assert metrics.nonfinite_episodes == 1 and w.pop_metrics().nonfinite_episodes == 0


def test_skip_of_an_episode_that_ends_on_the_bad_step_drops_its_statistics() -> None:
    w = worker(
        functools.partial(counting, at_steps=[5], field="observation"),
        on_nonfinite="skip",
        observation_filter="MeanStdFilter",
    )
    batch = w.sample()
    assert all_finite(batch[OBS])
    assert [(e.return_, e.length) for e in w.pop_episode_stats()] == [(5.0, 5)]
    assert w.pop_metrics().nonfinite_episodes == 1
    stats = w.get_filters()["default_policy"]
    assert stats.running.n > 0
    assert all_finite(stats.running.mean) and all_finite(stats.running.m2)


def test_skip_resets_again_while_the_first_observation_is_not_finite() -> None:
    class NaNResetOnce(CountingEnv):
        resets = 0

        def reset(self, **kwargs: Any) -> Any:
            obs, info = super().reset(**kwargs)
            NaNResetOnce.resets += 1
            bad = NaNResetOnce.resets == 3  # the probe's, sub-env 0's, then sub-env 0's next
            return (np.full_like(obs, np.nan) if bad else obs), info

    w = worker(NaNResetOnce, on_nonfinite="skip")
    batch = w.sample()
    assert all_finite(batch[OBS]) and batch.count == 10
    assert w.pop_metrics().nonfinite_episodes == 1


def test_skip_in_evaluation_leaves_the_dropped_episode_out() -> None:
    w = worker(functools.partial(counting, at_steps=[2]), on_nonfinite="skip")
    sampler = w._ensure_sampler()  # the evaluation loop of the same sampler
    episodes = sampler.run_episodes(2)
    assert [(e.return_, e.length) for e in episodes] == [(5.0, 5), (5.0, 5)]


def test_skip_needs_rlflows_own_env_loop() -> None:
    with pytest.raises(ConfigError, match=r"on_nonfinite='skip'.*vector_env='rlflow'"):
        worker("CartPole-v1", on_nonfinite="skip", vector_env="gymnasium-sync")


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"on_nonfinite": "drop"}, r"on_nonfinite='drop': must be one of 'raise', 'skip'"),
        ({"max_nonfinite_updates": 0}, r"max_nonfinite_updates"),
    ],
)
def test_bad_settings_are_config_errors(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        PPOConfig(**fields)


# ----------------------------------------------------------------------------- multi-agent
class TwoAgents(MultiAgentEnv):
    """Agents a and b act every step; observation [t]; reward 1 each; episodes of 4 steps;
    agent b's reward is NaN on the env's ``BAD_STEP``-th step (over its life)."""

    BAD_STEP = 6

    def __init__(self) -> None:
        self.possible_agents = ["a", "b"]
        self.agents: list[str] = []
        box = spaces.Box(0.0, 100.0, (1,), np.float32)
        self.observation_spaces = dict.fromkeys(self.possible_agents, box)
        self.action_spaces = {a: spaces.Discrete(2) for a in self.possible_agents}
        self.t = self.steps = 0

    def _obs(self) -> dict[str, Any]:
        return {a: np.array([self.t], np.float32) for a in self.agents}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.t, self.agents = 0, ["a", "b"]
        return self._obs(), {}

    def step(self, action_dict: Mapping[str, Any]) -> MultiAgentStep:
        self.steps += 1
        self.t += 1
        done = self.t >= 4
        flags = {"a": False, "b": False, ALL_AGENTS: done}
        rewards = {"a": 1.0, "b": float("nan") if self.steps == self.BAD_STEP else 1.0}
        return MultiAgentStep(self._obs(), rewards, {**flags, ALL_AGENTS: False}, flags, {})


def ma_worker(**config: Any) -> RolloutWorker:
    return worker(TwoAgents, rollout_fragment_length=8, policies={"p": PolicySpec()}, **config)


def test_multi_agent_nonfinite_reward_is_an_error_naming_the_agent() -> None:
    with pytest.raises(NonFiniteError) as info:
        ma_worker().sample()
    assert str(info.value).startswith(
        "env 'TwoAgents', rollout worker 1, env 0, agent 'b': returned a non-finite reward "
        "(nan) at step 2 of its episode"
    )


def test_multi_agent_skip_cuts_every_agent_and_drops_the_episode() -> None:
    w = ma_worker(on_nonfinite="skip")
    batch = w.sample().policy_batches["p"]
    assert all_finite(batch[REWARDS])
    for agent in (0, 1):
        rows = batch[AGENT_INDEX] == agent
        # Episode 1 (4 steps), episode 2 cut after its first step (the bad second step is
        # dropped), then episode 3 from its reset: its 2 steps in the fragment's 8.
        assert batch[OBS][rows, 0].tolist() == [0, 1, 2, 3, 0, 0, 1]
        # (episodes end by truncation after 4 steps)
        assert batch[TRUNCATEDS][rows].tolist() == [False] * 3 + [True, True] + [False] * 2
    assert len(w.pop_episode_stats()) == 1
    assert w.pop_metrics().nonfinite_episodes == 1

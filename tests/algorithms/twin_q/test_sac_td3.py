"""SAC and TD3 (unit tier): squashing, the tanh log-prob correction, Polyak targets, TD3's delay
and target smoothing, SAC's alpha tuning, weights and state, config and space errors."""

from __future__ import annotations

import math
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow import Trainer
from rlflow.algorithms import SACConfig, TD3Config
from rlflow.algorithms.sac import SACPolicy, sac_plan, squashed_logp
from rlflow.algorithms.td3 import TD3Policy
from rlflow.config import PolicySpec
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    SampleBatch,
)
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentEnv, MultiAgentStep
from rlflow.errors import ConfigError
from rlflow.ops.keys import TD_ERROR
from rlflow.replay import DISCOUNTS
from rlflow.testing.envs import CountingEnv
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)
ACT_SPACE = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 5.0], np.float32))
SMALL: dict[str, Any] = {"model": {"hidden": (16,)}, "train_batch_size": 8, "learning_starts": 0}


def sac(**kwargs: Any) -> SACPolicy:
    return SACPolicy(OBS_SPACE, ACT_SPACE, SACConfig(**{**SMALL, **kwargs}), seed=0)


def td3(**kwargs: Any) -> TD3Policy:
    return TD3Policy(OBS_SPACE, ACT_SPACE, TD3Config(**{**SMALL, **kwargs}), seed=0)


def batch(size: int = 8, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    low, high = ACT_SPACE.low, ACT_SPACE.high
    return SampleBatch(
        {
            OBS: rng.uniform(-1, 1, (size, 3)).astype(np.float32),
            ACTIONS: rng.uniform(low, high, (size, 2)).astype(np.float32),
            REWARDS: rng.normal(size=size).astype(np.float32),
            NEXT_OBS: rng.uniform(-1, 1, (size, 3)).astype(np.float32),
            TERMINATEDS: rng.random(size) < 0.2,
            DISCOUNTS: np.full(size, 0.99, dtype=np.float32),
        }
    )


def params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def moved(before: list[torch.Tensor], module: torch.nn.Module) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, module.parameters(), strict=True))


# ------------------------------------------------------------------------------ acting
@pytest.mark.parametrize("make", [sac, lambda: td3(exploration_noise=5.0)], ids=["sac", "td3"])
def test_actions_are_squashed_into_the_box(make: Any) -> None:
    policy = make()
    obs = np.random.default_rng(1).uniform(-1, 1, (2000, 3)).astype(np.float32)
    for explore in (True, False):
        actions, _ = policy.compute_actions(obs, explore=explore)
        assert actions.shape == (2000, 2)
        assert np.all(actions >= ACT_SPACE.low) and np.all(actions <= ACT_SPACE.high)
    explored, _ = policy.compute_actions(obs, explore=True)
    greedy, _ = policy.compute_actions(obs, explore=False)
    assert not np.allclose(explored, greedy)
    # Noise that large drives TD3's actions to both edges: clipped, not wrapped or dropped.
    if isinstance(policy, TD3Policy):
        assert np.isclose(explored, ACT_SPACE.high).mean() > 0.2


def numeric_logp(x: np.ndarray, mean: np.ndarray, log_std: np.ndarray, half: Any) -> np.ndarray:
    """log N(x; mean, std) - log |da/dx| for a = mid + half * tanh(x), da/dx by differences."""
    h = 1e-6
    slope = (np.tanh(x + h) - np.tanh(x - h)) / (2 * h) * half
    log_normal = -0.5 * ((x - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
    out: np.ndarray = (log_normal - np.log(slope)).sum(axis=1)
    return out


def test_squashed_logp_matches_a_numeric_change_of_variables() -> None:
    rng = np.random.default_rng(2)
    x, mean = rng.normal(0, 2, (64, 2)), rng.normal(0, 1, (64, 2))
    log_std = rng.uniform(-2, 1, (64, 2))
    got = squashed_logp(*(torch.as_tensor(v) for v in (x, mean, log_std)))
    np.testing.assert_allclose(got.numpy(), numeric_logp(x, mean, log_std, 1.0), rtol=1e-6)
    # The policy's LOGP is in env units (the Box's half-ranges 2 and 2.5); greedy: x = mean.
    policy = sac()
    _, extra = policy.compute_actions(rng.uniform(-1, 1, (64, 3)), explore=False)
    mean, log_std = np.split(extra[ACTION_DIST_INPUTS].astype(np.float64), 2, axis=1)
    half = (ACT_SPACE.high - ACT_SPACE.low) / 2
    expected = numeric_logp(mean, mean, np.clip(log_std, -20, 2), half)
    np.testing.assert_allclose(extra[LOGP], expected, rtol=1e-4, atol=1e-4)


def test_squashed_density_integrates_to_one() -> None:
    mean, log_std = torch.tensor([[0.7]], dtype=torch.float64), torch.tensor([[0.4]])
    unit = torch.linspace(-1 + 1e-9, 1 - 1e-9, 200_001, dtype=torch.float64).reshape(-1, 1)
    logp = squashed_logp(torch.atanh(unit), mean, log_std.double())
    assert float(torch.trapezoid(logp.exp(), unit[:, 0])) == pytest.approx(1.0, abs=1e-3)


# ---------------------------------------------------------------------------- learning
@pytest.mark.parametrize("make", [sac, td3], ids=["sac", "td3"])
def test_target_networks_move_by_tau(make: Any) -> None:
    policy = make(tau=0.25, policy_delay=1) if make is td3 else make(tau=0.25)
    target_before = params(policy.target_model)
    stats = policy.update.learn_on_batch(batch())
    assert stats[TD_ERROR].shape == (8,) and np.all(stats[TD_ERROR] >= 0)
    online = params(policy.net)
    assert any(not torch.equal(a, b) for a, b in zip(online, target_before, strict=True))
    policy.update_target()
    for new, old, src in zip(policy.target_model.parameters(), target_before, online, strict=True):
        torch.testing.assert_close(new, 0.25 * src + 0.75 * old)


def test_td3_trains_the_actor_and_moves_targets_every_policy_delay_updates() -> None:
    policy = td3(policy_delay=3)
    actor_steps, critic_steps, target_steps = [], [], []
    for step in range(7):
        actor, critics = params(policy.net.actor), params(policy.net.critics)
        target = params(policy.target_model)
        policy.update.learn_on_batch(batch(seed=step))
        policy.update_target()
        actor_steps.append(moved(actor, policy.net.actor))
        critic_steps.append(moved(critics, policy.net.critics))
        target_steps.append(moved(target, policy.target_model))
    every_third = [True, False, False, True, False, False, True]
    assert actor_steps == every_third and target_steps == every_third
    assert all(critic_steps)


def test_td3_target_smoothing_noise_is_clipped() -> None:
    policy = td3(target_noise=10.0, target_noise_clip=0.1)
    seen: list[torch.Tensor] = []
    original = policy.q_values

    def recording(model: Any, obs: torch.Tensor, unit: torch.Tensor) -> torch.Tensor:
        seen.append(unit.detach().clone())
        return original(model, obs, unit)

    policy.q_values = recording  # type: ignore[method-assign]
    next_obs = torch.as_tensor(
        np.random.default_rng(3).uniform(-1, 1, (500, 3)), dtype=torch.float32
    )
    with torch.no_grad():
        mu = policy.mu(policy.target_model.actor, next_obs)
        policy.next_value(next_obs)
    noise = seen[0] - mu
    assert float(noise.abs().max()) <= 0.1 + 1e-6
    assert float(noise.abs().mean()) > 0.09  # std 10 clipped to 0.1: nearly always at the clip


@pytest.mark.parametrize(("target_entropy", "direction"), [(5.0, 1.0), (-20.0, -1.0)])
def test_alpha_tuning_moves_log_alpha_toward_target_entropy(
    target_entropy: float, direction: float
) -> None:
    # The squashed policy's entropy (per 2-D unit action) is at most 2 log 2 ~ 1.4 and far above
    # -20: alpha grows while the entropy is below the target and shrinks while above it.
    policy = sac(target_entropy=target_entropy, alpha_lr=0.05, lr=1e-6, actor_lr=1e-6)
    before = float(policy.log_alpha.detach())
    for step in range(5):
        policy.update.learn_on_batch(batch(seed=step))
    assert direction * (float(policy.log_alpha.detach()) - before) > 0.1


def test_alpha_lr_zero_keeps_initial_alpha_and_auto_entropy_is_minus_dims() -> None:
    policy = sac(alpha_lr=0.0, initial_alpha=0.2)
    policy.update.learn_on_batch(batch())
    assert policy.alpha == pytest.approx(0.2) and policy.target_entropy == -2.0


# ------------------------------------------------------------------------ weights, state
@pytest.mark.parametrize("make", [sac, td3], ids=["sac", "td3"])
def test_workers_get_the_actor_only_and_state_restores_everything(make: Any) -> None:
    trained = make()
    for step in range(3):
        trained.update.learn_on_batch(batch(seed=step))
        trained.update_target()
    weights = trained.get_weights()
    assert set(weights) == set(trained.net.actor.state_dict())
    assert all(isinstance(v, np.ndarray) for v in weights.values())
    worker = make()
    worker.set_weights(weights)
    obs = batch()[OBS]
    np.testing.assert_array_equal(
        worker.compute_actions(obs, explore=False)[0],
        trained.compute_actions(obs, explore=False)[0],
    )
    copy = make()
    copy.set_state(trained.get_state())
    a, b = trained.update.learn_on_batch(batch(seed=9)), copy.update.learn_on_batch(batch(seed=9))
    assert {k: v for k, v in a.items() if k != TD_ERROR} == {
        k: v for k, v in b.items() if k != TD_ERROR
    }
    np.testing.assert_array_equal(a[TD_ERROR], b[TD_ERROR])
    for x, y in zip(trained.target_model.parameters(), copy.target_model.parameters(), strict=True):
        assert torch.equal(x, y)


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (SACConfig, {"tau": 0.0}, "SACConfig.tau=0.0 must be a number > 0"),
        (SACConfig, {"tau": 1.5}, "SACConfig.tau=1.5"),
        (SACConfig, {"initial_alpha": 0}, "SACConfig.initial_alpha=0 must be a number > 0"),
        (SACConfig, {"target_entropy": "high"}, "SACConfig.target_entropy='high' must be a num"),
        (SACConfig, {"alpha_lr": -1.0}, "SACConfig.alpha_lr=-1.0"),
        (SACConfig, {"actor_lr": 0}, "SACConfig.actor_lr=0"),
        (SACConfig, {"lr_schedule": [[0, 1e-3]]}, "SACConfig.lr_schedule=.* not supported"),
        (SACConfig, {"buffer_size": 100}, "SACConfig.buffer_size=100 must be >= train_batch"),
        (TD3Config, {"policy_delay": 0}, "TD3Config.policy_delay=0 must be an integer >= 1"),
        (TD3Config, {"target_noise": -0.1}, "TD3Config.target_noise=-0.1"),
        (TD3Config, {"target_noise_clip": -1.0}, "TD3Config.target_noise_clip=-1.0"),
        (TD3Config, {"exploration_noise": -1.0}, "TD3Config.exploration_noise=-1.0"),
        (TD3Config, {"training_intensity": 0}, "TD3Config.training_intensity=0"),
        (TD3Config, {"n_step": 0}, "TD3Config.n_step=0"),
    ],
)
def test_configs_reject_bad_values(cls: type, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cls(**kwargs)


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_a_discrete_action_space_is_rejected_before_any_actor_starts(algo: str) -> None:
    with pytest.raises(ConfigError, match=rf"algorithm '{algo}' cannot use env 'CartPole-v1'") as e:
        Trainer(algo, env="CartPole-v1", backend="local", num_workers=1)
    assert "Discrete(2)" in str(e.value) and "Policy takes Box action spaces, not" in str(e.value)


# --------------------------------------------------------------------------- multi-agent
class TwoPendulums(MultiAgentEnv):
    """Two Pendulum-v1 envs cut at 8 steps, one per agent; both end together."""

    def __init__(self) -> None:
        self.possible_agents = ["a", "b"]
        self.agents = []
        self.envs = {a: gym.make("Pendulum-v1", max_episode_steps=8) for a in self.possible_agents}
        self.observation_spaces = {a: e.observation_space for a, e in self.envs.items()}
        self.action_spaces = {a: e.action_space for a, e in self.envs.items()}

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, Any]:
        self.agents = list(self.possible_agents)
        firsts = {a: e.reset(seed=seed) for a, e in self.envs.items()}
        return {a: f[0] for a, f in firsts.items()}, {a: f[1] for a, f in firsts.items()}

    def step(self, action_dict: Any) -> MultiAgentStep:
        out = MultiAgentStep({}, {}, {}, {}, {})
        for agent in self.agents:
            obs, reward, term, trunc, info = self.envs[agent].step(action_dict[agent])
            out.obs[agent], out.rewards[agent], out.infos[agent] = obs, float(reward), info
            out.terminateds[agent], out.truncateds[agent] = term, trunc
        over = all(out.truncateds[a] for a in self.agents)
        out.terminateds[ALL_AGENTS], out.truncateds[ALL_AGENTS] = False, over
        self.agents = [] if over else self.agents
        return out


def test_sac_and_td3_policies_train_side_by_side_in_one_multi_agent_plan(
    local_backend: None,
) -> None:
    config = SACConfig(
        env=TwoPendulums,
        num_workers=1,
        learning_starts=16,
        train_batch_size=16,
        rollout_fragment_length=8,
        min_steps_per_iteration=32,
        min_time_s_per_iteration=0.0,
        model={"hidden": (8,)},
        policies={"sac": PolicySpec(), "td3": PolicySpec(policy_class=TD3Policy)},
        policy_mapping_fn=lambda agent: "sac" if agent == "a" else "td3",
    )
    workers = WorkerSet(config, SACPolicy)
    first, second = sac_plan(workers, config).take(2)
    learner = workers.local_worker()
    assert isinstance(learner.get_policy("td3"), TD3Policy)
    assert second["num_env_steps_trained"] > first["num_env_steps_trained"] > 0
    sac_steps, td3_steps = (learner.get_policy(p).update.num_grad_updates for p in ("sac", "td3"))
    assert sac_steps == td3_steps > 0  # one train step per round, for each policy
    assert set(second["info"]["learner"]) == {"sac", "td3"}


# --------------------------------------------------------------------------- iterations
def test_a_default_sac_iteration_is_at_least_100_steps_and_one_second(local_backend: None) -> None:
    """SAC's train item is one env step and one gradient step: with one result per item, the
    progress line and the loggers' rows paced the run (34 env steps/s on InvertedPendulum-v5).
    Its defaults (RLlib SAC's) make an iteration at least 100 env steps and 1 s."""
    config = SACConfig(
        env=CountingEnv,
        env_config={"episode_len": 3, "continuous": True},
        learning_starts=20,
        model={"hidden": (8,)},
    )
    workers = WorkerSet(config, SACPolicy)
    try:
        plan = sac_plan(workers, config)
        start = time.monotonic()
        first = next(plan)
        # The first iteration's clock starts at its first train item, after `start`.
        assert time.monotonic() - start >= 1.0
        second = next(plan)
        assert time.monotonic() - start >= 2.0
    finally:
        workers.stop()
    for result in (first, second):
        assert result["num_env_steps_sampled_this_iter"] >= 100
    assert second["num_env_steps_trained"] > 0

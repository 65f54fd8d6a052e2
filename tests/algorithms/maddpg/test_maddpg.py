"""MADDPG and MATD3 (`rlflow.algorithms.maddpg`, `rlflow.algorithms.matd3`): decentralized
actors, centralized critics, the Gumbel-softmax, MATD3's delay and smoothing, the export of
member actors, and the errors for runs without a team."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow.algorithms.maddpg import MADDPGConfig, MADDPGPolicy, MemberActor, gumbel_softmax
from rlflow.algorithms.maddpg.actor import gumbel_noise
from rlflow.algorithms.matd3 import MATD3Config, MATD3Policy
from rlflow.data.sample_batch import ACTIONS, NEXT_OBS, OBS, REWARDS, TERMINATEDS, SampleBatch
from rlflow.envs.groups import TeamBox
from rlflow.errors import ConfigError
from rlflow.replay import DISCOUNTS

SMALL: dict[str, Any] = {"model": {"hidden": (16,)}, "train_batch_size": 8, "learning_starts": 0}
OBS_SIZES = [2, 3]  # member a: 2 values (padded to 3), member b: 3; state: 4 values


def team_space(*, masks: int = 0, action_sizes: tuple[int, int] = (3, 4)) -> TeamBox:
    """Members a (obs 2, padded to 3) and b (obs 3), each with ``masks`` mask values, then a
    state of 4 values."""
    low: list[float] = []
    high: list[float] = []
    for size in OBS_SIZES:
        low += [-5.0] * size + [0.0] * (3 - size) + [0.0] * masks
        high += [5.0] * size + [0.0] * (3 - size) + [1.0] * masks
    low, high = low + [-5.0] * 4, high + [5.0] * 4
    return TeamBox(
        np.array(low, np.float32),
        np.array(high, np.float32),
        agent_ids=["a", "b"],
        agent_obs_size=3,
        agent_mask_size=masks,
        state_size=4,
        agent_action_sizes=list(action_sizes),
    )


BOX_ACTIONS = gym.spaces.Box(
    np.array([-1.0, 0.0, -2.0], np.float32), np.array([1.0, 2.0, 2.0], np.float32)
)  # member a: 1 value, member b: 2


def discrete(cls: type[MADDPGPolicy] = MADDPGPolicy, **kwargs: Any) -> MADDPGPolicy:
    config_cls = MATD3Config if cls is MATD3Policy else MADDPGConfig
    return cls(
        team_space(), gym.spaces.MultiDiscrete([3, 4]), config_cls(**{**SMALL, **kwargs}), seed=0
    )


def box(cls: type[MADDPGPolicy] = MADDPGPolicy, **kwargs: Any) -> MADDPGPolicy:
    config_cls = MATD3Config if cls is MATD3Policy else MADDPGConfig
    space = team_space(action_sizes=(1, 2))
    return cls(space, BOX_ACTIONS, config_cls(**{**SMALL, **kwargs}), seed=0)


def team_obs(policy: MADDPGPolicy, rows: int, seed: int = 0) -> np.ndarray:
    """Random team observations (padding zero, masks all legal)."""
    space = policy.team.space
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (rows, space.shape[0])).astype(np.float32)
    per = space.agent_obs_size + space.agent_mask_size
    obs[:, 2] = 0.0  # member a's padding
    for i in range(2):
        obs[:, i * per + 3 : (i + 1) * per] = 1.0
    return obs


def batch(policy: MADDPGPolicy, size: int = 8, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    if policy.team.discrete:
        actions = np.stack([rng.integers(0, 3, size), rng.integers(0, 4, size)], axis=1)
    else:
        actions = rng.uniform(BOX_ACTIONS.low, BOX_ACTIONS.high, (size, 3)).astype(np.float32)
    return SampleBatch(
        {
            OBS: team_obs(policy, size, seed),
            ACTIONS: actions,
            REWARDS: rng.normal(size=size).astype(np.float32),
            NEXT_OBS: team_obs(policy, size, seed + 100),
            TERMINATEDS: rng.random(size) < 0.2,
            DISCOUNTS: np.full(size, 0.95, dtype=np.float32),
        }
    )


def snapshot(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def moved(before: list[torch.Tensor], module: torch.nn.Module) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, module.parameters(), strict=True))


# ------------------------------------------------------------------ decentralized acting
@pytest.mark.parametrize("make", [discrete, box], ids=["discrete", "box"])
@pytest.mark.parametrize("explore", [False, True])
def test_a_members_action_depends_only_on_its_own_observation(make: Any, explore: bool) -> None:
    policy = make()
    obs = team_obs(policy, 64)
    changed = obs.copy()
    changed[:, 3:] = team_obs(policy, 64, seed=5)[:, 3:]  # member b's observation and the state
    policy.generator.manual_seed(1)
    before, _ = policy.compute_actions(obs, explore=explore)
    policy.generator.manual_seed(1)
    after, _ = policy.compute_actions(changed, explore=explore)
    a_columns = slice(0, 1)  # member a's action: one value in both kinds
    np.testing.assert_array_equal(before[:, a_columns], after[:, a_columns])
    assert not np.array_equal(before[:, 1:], after[:, 1:])  # b's own observation changed


def test_discrete_members_never_take_masked_actions() -> None:
    space = TeamBox(
        np.zeros(2 * (2 + 3) + 1, np.float32),
        np.ones(2 * (2 + 3) + 1, np.float32),
        agent_ids=["a", "b"],
        agent_obs_size=2,
        agent_mask_size=3,
        state_size=1,
        agent_action_sizes=[3, 3],
    )
    policy = MADDPGPolicy(space, gym.spaces.MultiDiscrete([3, 3]), MADDPGConfig(**SMALL), seed=0)
    obs = np.random.default_rng(0).uniform(0, 1, (200, 11)).astype(np.float32)
    obs[:, 2:5] = [0.0, 1.0, 0.0]  # a: only action 1
    obs[:, 7:10] = [1.0, 0.0, 1.0]  # b: 0 or 2
    actions, _ = policy.compute_actions(obs, explore=True)
    assert set(actions[:, 0].tolist()) == {1} and set(actions[:, 1].tolist()) == {0, 2}


# ------------------------------------------------------------------ centralized critics
@pytest.mark.parametrize("critic_input", ["observations", "state_and_observations"])
def test_the_critic_input_holds_every_members_observation_and_action(critic_input: str) -> None:
    policy = discrete(critic_input=critic_input)
    data = batch(policy, size=5)
    team = policy.split(torch.as_tensor(data[OBS]))
    x = policy.critic_x(team, policy.critic_actions(torch.as_tensor(data[ACTIONS])))
    obs = data[OBS]
    expected = [obs[:, 0:3], obs[:, 3:6]]  # both members' (padded) observations
    if critic_input == "state_and_observations":
        expected.append(obs[:, 6:10])
    expected += [np.eye(3)[data[ACTIONS][:, 0]], np.eye(4)[data[ACTIONS][:, 1]]]  # one-hot
    np.testing.assert_allclose(x.numpy(), np.concatenate(expected, axis=1), rtol=1e-6)
    assert x.shape[1] == policy.critic_input_size() == policy.net.critics[0][0].net[0].in_features


def test_box_actions_reach_the_critics_in_unit_space() -> None:
    policy = box()
    actions = torch.tensor([[1.0, 0.0, 2.0], [-1.0, 1.0, 0.0]])
    unit = torch.cat(policy.critic_actions(actions), dim=1)
    assert unit.tolist() == [[1.0, -1.0, 1.0], [-1.0, 0.0, 0.0]]


def test_each_members_actor_learns_through_its_own_critic_and_every_part_trains() -> None:
    policy = discrete()
    parts = {
        "actor a": policy.net.actors[0],
        "actor b": policy.net.actors[1],
        "critic a": policy.net.critics[0],
        "critic b": policy.net.critics[1],
    }
    before = {name: snapshot(module) for name, module in parts.items()}
    target = snapshot(policy.target_model)
    stats = policy.update.learn_on_batch(batch(policy))
    assert all(moved(before[name], module) for name, module in parts.items())
    assert not moved(target, policy.target_model)  # the plan's UpdateTargetNetwork moves it
    assert {"critic_loss", "actor_loss", "mean_q"} <= set(stats)
    policy.update_target()  # Polyak: tau of the way
    online = next(policy.net.parameters()).detach()
    after = next(policy.target_model.parameters()).detach()
    expected = (1 - policy.config.tau) * target[0] + policy.config.tau * online
    torch.testing.assert_close(after, expected)


# ------------------------------------------------------------------ Gumbel-softmax
def test_gumbel_softmax_is_one_hot_forward_and_passes_the_softmax_gradient_back() -> None:
    logits = torch.tensor([[0.5, 1.5, -1.0], [2.0, 0.0, 0.0]], requires_grad=True)
    noise = gumbel_noise((2, 3), torch.Generator().manual_seed(0))
    y = gumbel_softmax(logits, noise, temperature=0.5)
    winners = (logits + noise).argmax(dim=1)
    assert y.detach().tolist() == torch.nn.functional.one_hot(winners, 3).float().tolist()
    weights = torch.tensor([[1.0, 2.0, 3.0], [3.0, 1.0, 2.0]])
    (y * weights).sum().backward()
    soft = torch.softmax((logits.detach() + noise) / 0.5, dim=1)
    # d/dlogits of sum(w * softmax(z / T)) = soft * (w - sum(soft * w)) / T
    expected = soft * (weights - (soft * weights).sum(dim=1, keepdim=True)) / 0.5
    torch.testing.assert_close(logits.grad, expected)


def test_gumbel_max_draws_follow_the_softmax() -> None:
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3]])).expand(20_000, 3)
    noise = gumbel_noise((20_000, 3), torch.Generator().manual_seed(0))
    counts = torch.bincount((logits + noise).argmax(dim=1), minlength=3).float() / 20_000
    torch.testing.assert_close(counts, torch.tensor([0.2, 0.5, 0.3]), atol=0.015, rtol=0)


# ------------------------------------------------------------------ MATD3
def test_matd3_trains_actors_and_targets_every_policy_delay_updates() -> None:
    policy = discrete(MATD3Policy, policy_delay=3)
    assert all(len(critics) == 2 for critics in policy.net.critics)
    actor_updates, target_updates = [], []
    for step in range(7):
        actors, target = snapshot(policy.net.actors), snapshot(policy.target_model)
        critics = snapshot(policy.net.critics)
        policy.update.learn_on_batch(batch(policy, seed=step))
        policy.update_target()
        assert moved(critics, policy.net.critics)  # the critics train every update
        actor_updates.append(moved(actors, policy.net.actors))
        target_updates.append(moved(target, policy.target_model))
    assert actor_updates == [True, False, False, True, False, False, True]
    assert target_updates == actor_updates


def test_matd3_smooths_box_target_actions_with_clipped_noise() -> None:
    policy = box(MATD3Policy, target_noise=10.0, target_noise_clip=0.1)
    team = policy.split(torch.as_tensor(team_obs(policy, 500)))
    greedy = torch.tanh(torch.cat(policy.actor_outputs(policy.target_model, team), dim=1))
    smoothed = torch.cat(policy.target_actions(team), dim=1)
    noise = smoothed - greedy.clamp(-1, 1)
    assert float(noise.abs().max()) <= 0.1 + 1e-6
    assert float(noise.abs().mean()) > 0.09  # std 10 clipped to 0.1: nearly always at the clip
    plain = box()  # MADDPG: the target actors' own actions
    team = plain.split(torch.as_tensor(team_obs(plain, 5)))
    outs = plain.actor_outputs(plain.target_model, team)
    torch.testing.assert_close(
        torch.cat(plain.target_actions(team), dim=1), torch.tanh(torch.cat(outs, dim=1))
    )


def test_matd3_smooths_discrete_target_actions_with_softmax_draws() -> None:
    policy = discrete(MATD3Policy)
    team = policy.split(torch.as_tensor(team_obs(policy, 400)))
    outs = policy.actor_outputs(policy.target_model, team)
    drawn = policy.target_actions(team)
    greedy = policy.greedy_actions(outs)
    for d, g in zip(drawn, greedy, strict=True):
        assert torch.all(d.sum(dim=1) == 1)  # one-hot
        assert 0 < float((d != g).any(dim=1).float().mean()) < 1


# ------------------------------------------------------------------ export
@pytest.mark.parametrize("make", [discrete, box], ids=["discrete", "box"])
def test_each_member_exports_its_actor_acting_from_its_own_observation(make: Any) -> None:
    policy = make()
    for step in range(2):
        policy.update.learn_on_batch(batch(policy, seed=step))
    exports = policy.export_agent_models()
    spaces = policy.agent_spaces()
    assert list(exports) == ["a", "b"]
    obs = team_obs(policy, 32)
    greedy, _ = policy.compute_actions(obs, explore=False)
    columns = {"a": slice(0, 1), "b": slice(1, 2 if policy.team.discrete else 3)}
    own = {"a": obs[:, 0:2], "b": obs[:, 3:6]}  # each member's own, unpadded observation
    for agent, export in exports.items():
        assert export.actor_class is MemberActor
        assert not any("critic" in k for k in export.weights)
        obs_space, act_space = spaces[agent]
        assert obs_space.shape == (OBS_SIZES[["a", "b"].index(agent)],)
        actor = MemberActor(obs_space, act_space, **export.options)
        actor.load_state_dict({k: torch.as_tensor(v) for k, v in export.weights.items()})
        with torch.no_grad():
            acts = actor.act(
                torch.as_tensor(own[agent]), explore=False, generator=torch.Generator()
            )
        acts = acts.numpy()
        expected = greedy[:, columns[agent]]
        np.testing.assert_allclose(acts.reshape(expected.shape), expected, rtol=1e-5, atol=1e-6)


def test_a_member_actor_reads_its_mask_after_its_observation() -> None:
    space = TeamBox(
        np.zeros(2 * (2 + 3) + 1, np.float32),
        np.ones(2 * (2 + 3) + 1, np.float32),
        agent_ids=["a", "b"],
        agent_obs_size=2,
        agent_mask_size=3,
        state_size=1,
        agent_action_sizes=[3, 3],
    )
    policy = MADDPGPolicy(space, gym.spaces.MultiDiscrete([3, 3]), MADDPGConfig(**SMALL), seed=0)
    export = policy.export_agent_models()["b"]
    obs_space, act_space = policy.agent_spaces()["b"]
    assert obs_space.shape == (5,) and act_space == gym.spaces.Discrete(3)
    actor = MemberActor(obs_space, act_space, **export.options)
    actor.load_state_dict({k: torch.as_tensor(v) for k, v in export.weights.items()})
    own = torch.rand(50, 5)
    own[:, 2:] = torch.tensor([0.0, 0.0, 1.0])
    picks = actor.act(own, explore=True, generator=torch.Generator().manual_seed(0))
    assert set(picks.tolist()) == {2}


def test_the_team_policy_refuses_a_single_model_export() -> None:
    with pytest.raises(ConfigError, match=r"export_agent_models\(\)"):
        discrete().export_model()


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("algo", ["maddpg", "matd3"])
def test_a_run_without_groups_is_refused_naming_groups(algo: str) -> None:
    from rlflow.trainer import Trainer

    with pytest.raises(ConfigError, match=r"is not a team's.*set groups.*fixed member set"):
        Trainer(algo, env="Pendulum-v1", groups={}, backend="local")
    with pytest.raises(ConfigError, match=r"is not a team's.*set groups"):
        Trainer(algo, env="multi_cartpole", groups={}, backend="local")


def test_an_action_space_that_is_not_the_members_is_refused() -> None:
    with pytest.raises(ConfigError, match="must be the team's members' Discrete actions"):
        MADDPGPolicy(team_space(), gym.spaces.Discrete(3), MADDPGConfig(**SMALL))
    unbounded = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    with pytest.raises(ConfigError, match="with finite bounds"):
        MADDPGPolicy(team_space(action_sizes=(1, 2)), unbounded, MADDPGConfig(**SMALL))


def test_a_filter_that_would_normalize_action_masks_is_refused() -> None:
    space = TeamBox(
        np.zeros(2 * (2 + 3) + 1, np.float32),
        np.ones(2 * (2 + 3) + 1, np.float32),
        agent_ids=["a", "b"],
        agent_obs_size=2,
        agent_mask_size=3,
        state_size=1,
        agent_action_sizes=[3, 3],
    )
    config = MADDPGConfig(**SMALL, observation_filter="MeanStdFilter")
    with pytest.raises(ConfigError, match="would normalize the members' action masks"):
        MADDPGPolicy(space, gym.spaces.MultiDiscrete([3, 3]), config)


@pytest.mark.parametrize(
    ("cls", "field", "value", "message"),
    [
        (MADDPGConfig, "critic_input", "state", "must be one of 'observations'"),
        (MADDPGConfig, "gumbel_temperature", 0.0, "gumbel_temperature"),
        (MADDPGConfig, "exploration_noise", -1.0, "exploration_noise"),
        (MATD3Config, "policy_delay", 0, "policy_delay"),
    ],
)
def test_bad_settings_name_the_field(cls: Any, field: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cls(**{field: value})

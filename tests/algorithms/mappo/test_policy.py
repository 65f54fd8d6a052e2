"""MAPPO's policy (`rlflow.algorithms.mappo`): decentralized actors, a centralized critic,
action masks, value normalization, separate or shared actors, per-member exports, errors."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow.algorithms import get_algorithm
from rlflow.algorithms.mappo import MAPPOConfig
from rlflow.algorithms.mappo.policy import (
    MAPPOPolicy,
    MemberActor,
    TeamActor,
    ValueNorm,
    member_observation_space,
)
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    ADVANTAGES,
    LOGP,
    OBS,
    VALUE_TARGETS,
    VF_PREDS,
)
from rlflow.envs.groups import TeamBox
from rlflow.errors import ConfigError
from rlflow.models.distributions import DiagGaussian

pytestmark = pytest.mark.timeout(60)

# Three members: observations of 2, 4 and 3 values (padded to 4), 3, 3 and 2 actions; state 5.
OWN_SIZES = (2, 4, 3)
ACTION_SIZES = [3, 3, 2]
WIDTH, STATE = 4, 5


def team_box(mask: int = 0, action_sizes: list[int] | None = None) -> TeamBox:
    """A team layout as `GroupAgents` builds it: padding bounded by 0, masks by 0 and 1."""
    low: list[float] = []
    high: list[float] = []
    for size in OWN_SIZES:
        low += [-5.0] * size + [0.0] * (WIDTH - size) + [0.0] * mask
        high += [5.0] * size + [0.0] * (WIDTH - size) + [1.0] * mask
    low += [-9.0] * STATE
    high += [9.0] * STATE
    return TeamBox(
        np.array(low, np.float32),
        np.array(high, np.float32),
        agent_ids=["a", "b", "c"],
        agent_obs_size=WIDTH,
        agent_mask_size=mask,
        state_size=STATE,
        agent_action_sizes=action_sizes or ACTION_SIZES,
    )


def make_policy(
    continuous: bool = False, mask: int = 0, **overrides: Any
) -> tuple[MAPPOPolicy, TeamBox]:
    sizes = [3, 3, 3] if mask else ACTION_SIZES
    space = team_box(mask, sizes)
    action: gym.Space[Any]
    if continuous:
        action = gym.spaces.Box(-1.0, 1.0, (sum(sizes),), np.float32)
    else:
        action = gym.spaces.MultiDiscrete(sizes)
    config = MAPPOConfig(env="multi_cartpole", model={"hidden": [16, 16]}, **overrides)
    return MAPPOPolicy(space, action, config, seed=0), space


def as_float(stat: Any) -> float:
    """A loss stat as a float (tensors detached)."""
    return float(torch.as_tensor(stat).detach())


def random_obs(space: TeamBox, rows: int, seed: int = 0) -> np.ndarray:
    """Team observations: members' own values random, padding 0, masks all legal."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1.0, 1.0, (rows, space.shape[0])).astype(np.float32)
    obs[:, space.high == space.low] = 0.0
    per = space.agent_obs_size + space.agent_mask_size
    for i in range(space.num_agents):
        obs[:, i * per + space.agent_obs_size : (i + 1) * per] = 1.0
    return obs


def member_inputs(policy: MAPPOPolicy, obs: np.ndarray) -> list[torch.Tensor]:
    """Each member's slice of the joint action-distribution inputs (logits, or means)."""
    with torch.no_grad():
        joint = policy.model.actors(torch.as_tensor(obs))
    sizes = policy.team.agent_action_sizes
    if isinstance(policy.action_space, gym.spaces.Box):
        joint = joint[:, : sum(sizes)]
    return list(torch.split(joint, sizes, dim=-1))


@pytest.mark.parametrize("share_policy", [True, False])
@pytest.mark.parametrize("continuous", [False, True])
def test_actors_read_their_own_observation_and_the_critic_only_the_state(
    share_policy: bool, continuous: bool
) -> None:
    policy, space = make_policy(continuous, share_policy=share_policy)
    obs = random_obs(space, 8)
    before = member_inputs(policy, obs)
    value = policy.value(obs)
    changed = obs.copy()
    changed[:, WIDTH : WIDTH + OWN_SIZES[1]] += 0.7  # member b's observation
    changed[:, -STATE:] += 0.5  # the global state
    after = member_inputs(policy, changed)
    assert torch.equal(before[0], after[0]) and torch.equal(before[2], after[2])
    assert not torch.allclose(before[1], after[1])
    assert not np.allclose(policy.value(changed), value)
    members_only = obs.copy()
    members_only[:, : 3 * WIDTH] += 0.3
    assert np.array_equal(policy.value(members_only), value)  # the critic: the state alone


def test_members_log_probabilities_sum_to_the_joint_one() -> None:
    for continuous in (False, True):
        policy, space = make_policy(continuous)
        obs = random_obs(space, 16)
        actions, extra = policy.compute_actions(obs)
        inputs = torch.as_tensor(extra[ACTION_DIST_INPUTS])
        members = policy.model.actors.member_logp(inputs, torch.as_tensor(actions))
        assert members.shape == (16, 3)
        np.testing.assert_allclose(members.sum(-1).numpy(), extra[LOGP], rtol=1e-5, atol=1e-5)


def test_masked_actions_are_never_sampled() -> None:
    policy, space = make_policy(mask=3)
    obs = random_obs(space, 3000)
    per = WIDTH + 3
    masks = np.array([[1, 0, 1], [0, 1, 0], [0, 0, 1]], np.float32)
    for i, mask in enumerate(masks):
        obs[:, i * per + WIDTH : (i + 1) * per] = mask
    actions, _ = policy.compute_actions(obs)
    for i, mask in enumerate(masks):
        seen = set(np.unique(actions[:, i]).tolist())
        assert seen == set(np.flatnonzero(mask).tolist()), (i, seen)
    greedy, _ = policy.compute_actions(obs[:50], explore=False)
    assert all(masks[i][greedy[:, i]].all() for i in range(3))


def test_value_normalization_tracks_the_targets_and_the_critic_learns_their_normalized_form() -> (
    None
):
    norm = ValueNorm(beta=0.9)
    norm.update(torch.tensor([2.0, 4.0, 6.0]))
    # Debiased, one update gives the batch's own moments.
    assert float(norm.mean) == pytest.approx(4.0)
    assert float(norm.std) == pytest.approx(np.std([2.0, 4.0, 6.0]), rel=1e-5)
    norm.update(torch.tensor([10.0]))
    # Moments weighted 0.9 * 0.1 and 0.1 over the debiasing term 0.19.
    mean = (0.09 * 4.0 + 0.1 * 10.0) / 0.19
    assert float(norm.mean) == pytest.approx(mean, rel=1e-5)

    policy, space = make_policy(num_sgd_iter=1)
    norm = policy.model.value_norm
    assert norm is not None and float(norm.debiasing_term) == 0.0
    obs = random_obs(space, 64)
    actions, extra = policy.compute_actions(obs)
    targets = np.linspace(-30.0, 10.0, 64).astype(np.float32)
    batch = {
        OBS: obs,
        ACTIONS: actions,
        ACTION_DIST_INPUTS: extra[ACTION_DIST_INPUTS],
        LOGP: extra[LOGP],
        VF_PREDS: extra[VF_PREDS],
        ADVANTAGES: np.zeros(64, np.float32),
        VALUE_TARGETS: targets,
    }
    tensors = {k: torch.as_tensor(v) for k, v in batch.items()}
    beta = policy.config.valuenorm_beta
    _, stats = policy.loss(tensors)
    assert as_float(stats["value_norm_mean"]) == pytest.approx(targets.mean(), rel=1e-3)
    assert as_float(stats["value_norm_std"]) == pytest.approx(targets.std(), rel=1e-3)
    assert float(norm.debiasing_term) == pytest.approx(1.0 - beta)
    # The critic's loss is on the normalized targets; values the workers get are denormalized.
    with torch.no_grad():
        raw = policy.model.normalized_value(tensors[OBS])
        expected = ((raw - (tensors[VALUE_TARGETS] - targets.mean()) / targets.std()) ** 2).mean()
    assert as_float(stats["vf_loss"]) == pytest.approx(float(expected), rel=1e-3)
    np.testing.assert_allclose(
        policy.value(obs), raw.numpy() * targets.std() + targets.mean(), rtol=1e-4, atol=1e-3
    )
    # The statistics travel with the weights.
    weights = policy.get_weights()
    assert "value_norm.running_mean" in weights
    other, _ = make_policy()
    other.set_weights(weights)
    np.testing.assert_allclose(other.value(obs), policy.value(obs), rtol=1e-6)
    plain, _ = make_policy(use_valuenorm=False)
    assert plain.model.value_norm is None
    assert not any(k.startswith("value_norm") for k in plain.get_weights())


def test_the_huber_value_loss_is_quadratic_within_delta_linear_beyond_and_clipped() -> None:
    policy, space = make_policy(
        num_sgd_iter=1, use_valuenorm=False, use_huber_loss=True, vf_huber_delta=2.0
    )
    obs = random_obs(space, 8)
    actions, extra = policy.compute_actions(obs)
    with torch.no_grad():
        values = policy.model.normalized_value(torch.as_tensor(obs))
    errors = torch.tensor([0.5, -1.0, 3.0, -8.0, 0.0, 1.5, 20.0, -2.5])
    batch = {
        OBS: obs,
        ACTIONS: actions,
        ACTION_DIST_INPUTS: extra[ACTION_DIST_INPUTS],
        LOGP: extra[LOGP],
        VF_PREDS: values.numpy(),
        ADVANTAGES: np.zeros(8, np.float32),
        VALUE_TARGETS: (values - errors).numpy(),
    }
    tensors = {k: torch.as_tensor(v) for k, v in batch.items()}
    _, stats = policy.loss(tensors)
    # 0.5 e^2 within |e| <= 2, 2 (|e| - 1) beyond
    huber = torch.where(errors.abs() <= 2.0, 0.5 * errors**2, 2.0 * (errors.abs() - 1.0))
    assert as_float(stats["vf_loss"]) == pytest.approx(float(huber.mean()), rel=1e-4)
    # Clipped around VF_PREDS: a prediction that moved by 3 from its old value is held to 0.5
    # from it, and the larger of the two losses counts (MAPPO's clipped value loss).
    clipped, _ = make_policy(
        num_sgd_iter=1,
        use_valuenorm=False,
        use_huber_loss=True,
        vf_huber_delta=2.0,
        vf_clip_param=0.5,
    )
    moved = {**tensors, VF_PREDS: tensors[VF_PREDS] - 3.0}
    loss = clipped._vf_loss(values, moved)
    held = moved[VF_PREDS] + 0.5
    err_clipped = held - moved[VALUE_TARGETS]
    huber_clipped = torch.where(
        err_clipped.abs() <= 2.0, 0.5 * err_clipped**2, 2.0 * (err_clipped.abs() - 1.0)
    )
    expected = torch.max(huber, huber_clipped).mean()
    assert float(loss) == pytest.approx(float(expected), rel=1e-4)
    with pytest.raises(ConfigError, match="vf_huber_delta"):
        MAPPOConfig(vf_huber_delta=0.0)


def test_share_policy_false_gives_each_member_its_own_parameters() -> None:
    shared, space = make_policy()
    separate, _ = make_policy(share_policy=False)
    assert len(shared.model.actors.nets) == 1 and len(separate.model.actors.nets) == 3
    # The shared network reads the one-hot index: 4 observation values + 3.
    assert shared.model.actors.nets[0].net[0].in_features == WIDTH + 3
    assert separate.model.actors.nets[0].net[0].in_features == WIDTH
    # A loss on member b's log-probability only reaches member b's network.
    obs = torch.as_tensor(random_obs(space, 4))
    actors = separate.model.actors
    actions = torch.zeros(4, 3, dtype=torch.long)
    actors.member_logp(actors(obs), actions)[:, 1].sum().backward()
    grads = [
        any(p.grad is not None and p.grad.abs().sum() > 0 for p in n.parameters())
        for n in actors.nets
    ]
    assert grads == [False, True, False]
    no_id, _ = make_policy(agent_id_input=False)
    assert no_id.model.actors.nets[0].net[0].in_features == WIDTH


def test_per_agent_clipping_differs_from_the_joint_ratio_only_where_members_disagree() -> None:
    policy, space = make_policy(clip_param=0.1)
    joint, _ = make_policy(clip_param=0.1, clip_per_agent=False)
    joint.set_weights(policy.get_weights())
    obs = random_obs(space, 32)
    actions, extra = policy.compute_actions(obs)
    batch = {
        OBS: obs,
        ACTIONS: actions,
        ACTION_DIST_INPUTS: extra[ACTION_DIST_INPUTS],
        LOGP: extra[LOGP],
        VF_PREDS: extra[VF_PREDS],
        ADVANTAGES: np.ones(32, np.float32),
        VALUE_TARGETS: np.zeros(32, np.float32),
    }
    tensors = {k: torch.as_tensor(v) for k, v in batch.items()}
    # At the sampling weights every ratio is 1: both surrogates are -A.
    for p in (policy, joint):
        _, stats = p.loss(tensors)
        assert as_float(stats["policy_loss"]) == pytest.approx(-1.0, abs=1e-5)
        assert as_float(stats["clip_frac"]) == 0.0
    # Members' old logits moved: each member's ratio is 1.08 (within the clip), the joint
    # ratio 1.08^3 = 1.26 (clipped to 1.1).
    offsets = np.cumsum([0, *ACTION_SIZES])
    logp = policy.model.actors.member_logp(tensors[ACTION_DIST_INPUTS], tensors[ACTIONS])
    # Old logits such that log pi_old_i = log pi_i - log 1.08 for every member: the taken
    # action's logit x solves x - logsumexp(others, x) = target.
    target = logp - float(np.log(1.08))
    new_old = tensors[ACTION_DIST_INPUTS].clone()
    for i in range(3):
        part = new_old[:, offsets[i] : offsets[i + 1]]
        taken = tensors[ACTIONS][:, i]
        others = part.clone()
        others[torch.arange(32), taken] = -torch.inf
        lse_others = torch.logsumexp(others, dim=-1)
        x = target[:, i] + lse_others - torch.log1p(-target[:, i].exp())
        part[torch.arange(32), taken] = x
    shifted = {**tensors, ACTION_DIST_INPUTS: new_old}
    _, per_agent = policy.loss(shifted)
    _, whole = joint.loss(shifted)
    assert as_float(per_agent["policy_loss"]) == pytest.approx(-1.08, rel=1e-3)
    assert as_float(whole["policy_loss"]) == pytest.approx(-1.1, rel=1e-3)


def test_each_member_exports_an_actor_acting_from_its_own_observation() -> None:
    for continuous, share, mask in [
        (False, True, 0),
        (False, False, 0),
        (True, True, 0),
        (True, False, 0),
        (False, True, 3),
    ]:
        policy, space = make_policy(continuous, mask=mask, share_policy=share)
        exports = policy.export_agent_models()
        spaces = policy.agent_spaces()
        assert list(exports) == ["a", "b", "c"]
        obs = random_obs(space, 12)
        per = WIDTH + mask
        for i in range(3 if mask else 0):
            obs[:, i * per + WIDTH : (i + 1) * per] = [1, 0, 1]
        team_inputs = member_inputs(policy, obs)
        for i, agent in enumerate(["a", "b", "c"]):
            export = exports[agent]
            obs_space, action_space = spaces[agent]
            assert obs_space.shape == (OWN_SIZES[i] + mask,)
            actor = export.actor_class(obs_space, action_space, **export.options)
            actor.load_state_dict({k: torch.as_tensor(v) for k, v in export.weights.items()})
            own = np.concatenate(
                [obs[:, i * per : i * per + OWN_SIZES[i]], obs[:, i * per + WIDTH : (i + 1) * per]],
                axis=1,
            )
            with torch.no_grad():
                inputs = actor.action_inputs(torch.as_tensor(own))
            size = policy.team.agent_action_sizes[i]
            torch.testing.assert_close(inputs[:, :size], team_inputs[i])
            action = actor.act(torch.as_tensor(own), explore=True, generator=torch.Generator())
            assert action.shape == ((12, size) if continuous else (12,))
            if mask:
                assert set(action.tolist()) <= {0, 2}
            # No critic in the export.
            assert not any("critic" in k or "value" in k for k in export.weights)
    # The team's own export (the team observation in, the joint action out) has no critic.
    team = policy.export_model()
    assert team.actor_class is TeamActor and not any("critic" in k for k in team.weights)
    assert MemberActor in {e.actor_class for e in policy.export_agent_models().values()}


def test_member_observation_space_drops_the_padding() -> None:
    space = team_box(mask=2)
    assert [member_observation_space(space, i).shape for i in range(3)] == [(4,), (6,), (5,)]
    assert member_observation_space(space, 0).high.tolist() == [5.0, 5.0, 1.0, 1.0]


def test_spaces_mappo_cannot_train_are_refused_before_anything_runs() -> None:
    config = MAPPOConfig(env="multi_cartpole", model={"hidden": [8]})
    plain = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    with pytest.raises(ConfigError, match="not a team's; MAPPO trains teams of agents: set groups"):
        MAPPOPolicy(plain, gym.spaces.MultiDiscrete([2, 2]), config)
    masked = team_box(mask=3, action_sizes=[3, 3, 3])
    with pytest.raises(ConfigError, match="masks need Discrete actions"):
        MAPPOPolicy(masked, gym.spaces.Box(-1.0, 1.0, (9,), np.float32), config)
    with pytest.raises(ConfigError, match="action masks have 3 values, but their action counts"):
        MAPPOPolicy(team_box(mask=3), gym.spaces.MultiDiscrete(ACTION_SIZES), config)
    with pytest.raises(ConfigError, match="observation_filter='MeanStdFilter'"):
        MAPPOPolicy(
            team_box(),
            gym.spaces.MultiDiscrete(ACTION_SIZES),
            MAPPOConfig(env="multi_cartpole", observation_filter="MeanStdFilter"),
        )
    with pytest.raises(ConfigError, match=r"MAPPOConfig\.valuenorm_beta"):
        MAPPOConfig(valuenorm_beta=1.0)
    with pytest.raises(ConfigError, match=r"MAPPOConfig\.share_policy"):
        MAPPOConfig(share_policy="yes")


def test_a_run_without_groups_is_refused_before_any_actor_starts() -> None:
    from rlflow import Trainer

    with pytest.raises(ConfigError, match="set groups"):
        Trainer("mappo", config={"env": "multi_cartpole", "groups": {}}, backend="local")
    spec = get_algorithm("mappo")
    assert spec.policy_cls is MAPPOPolicy and spec.config_cls is MAPPOConfig


def test_gaussian_members_sample_around_their_means() -> None:
    policy, space = make_policy(continuous=True)
    obs = random_obs(space, 5)
    _, extra = policy.compute_actions(obs)
    inputs = torch.as_tensor(extra[ACTION_DIST_INPUTS])
    assert inputs.shape == (5, 2 * sum(ACTION_SIZES))
    dist = DiagGaussian(inputs)
    assert torch.equal(dist.log_std, torch.zeros_like(dist.log_std))

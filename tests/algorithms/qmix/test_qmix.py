"""QMIX and VDN (`rlflow.algorithms.qmix`, `rlflow.algorithms.vdn`): the mixers, action masks,
the sequence loss, the errors before anything starts, and the per-member export."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlflow.algorithms.qmix import QMIXConfig
from rlflow.algorithms.qmix.model import QMixer, TeamQNetwork, member_observation_size
from rlflow.algorithms.qmix.policy import QMIXPolicy
from rlflow.algorithms.vdn import VDNConfig
from rlflow.data.sample_batch import ACTIONS, OBS, REWARDS, SEQ_STEPS, SEQ_TERMINATED
from rlflow.envs.groups import GroupAgents, TeamBox
from rlflow.envs.ma_envs import TwoStepGame
from rlflow.errors import ConfigError
from rlflow.models.masking import MASKED_LOGIT

GROUPS = {"team": ["agent_0", "agent_1"]}


def masked_team() -> TeamBox:
    """Two members: observations of 2 and 1 values (padded to 2), action masks of 3, a state
    of 4; 3 and 2 actions."""
    low = np.array([-1, -1, 0, 0, 0, -1, 0, 0, 0, 0, -5, -5, -5, -5], np.float32)
    high = np.array([1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 5, 5, 5, 5], np.float32)
    return TeamBox(
        low,
        high,
        agent_ids=["a", "b"],
        agent_obs_size=2,
        agent_mask_size=3,
        state_size=4,
        agent_action_sizes=[3, 2],
    )


def team_obs(mask_a: list[float], mask_b: list[float], rows: int = 1) -> np.ndarray:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(rows):
        a = rng.uniform(-1, 1, 2)
        b = [rng.uniform(-1, 1), 0.0]
        out.append(np.concatenate([a, mask_a, b, mask_b, rng.uniform(-5, 5, 4)]))
    return np.asarray(out, np.float32)


def small_config(**overrides: Any) -> QMIXConfig:
    settings: dict[str, Any] = {
        "model": {"hidden": (16,), "lstm_cell_size": 8},
        "mixing_embed_dim": 8,
        "hypernet_embed": 16,
        "replay_sequence_length": 2,
        "train_batch_size": 4,
    }
    return QMIXConfig(**{**settings, **overrides})


def test_the_qmix_mixer_is_monotonic_in_every_agents_q_value() -> None:
    torch.manual_seed(0)
    for layers in (1, 2):
        mixer = QMixer(3, 6, embed_dim=32, hypernet_layers=layers, hypernet_embed=64)
        qs = torch.randn(256, 3, requires_grad=True) * 5
        qs.retain_grad()
        states = torch.randn(256, 6) * 3
        mixer(qs, states).sum().backward()
        assert qs.grad is not None
        assert (qs.grad >= 0).all()  # dQ_tot / dQ_a >= 0 for every state and agent
        assert (qs.grad > 0).any()


def test_vdn_mixes_by_the_sum_and_none_leaves_the_q_values() -> None:
    space = masked_team()
    obs = torch.as_tensor(team_obs([1, 1, 1], [1, 1, 0], rows=5)).reshape(5, 1, -1)
    qs = torch.randn(5, 1, 2)
    vdn = TeamQNetwork(space, [3, 2], mixer="vdn")
    torch.testing.assert_close(vdn.mix(qs, obs), qs.sum(dim=-1))
    assert torch.equal(TeamQNetwork(space, [3, 2], mixer="none").mix(qs, obs), qs)
    assert VDNConfig().mixer == "vdn" and QMIXConfig().mixer == "qmix"


def test_illegal_actions_are_never_chosen() -> None:
    space = masked_team()
    policy = QMIXPolicy(
        space, spaces.MultiDiscrete([3, 2]), small_config(final_epsilon=1.0), seed=0
    )
    model = policy.model
    assert isinstance(model, TeamQNetwork)
    with torch.no_grad():  # the shared network prefers action 1 by far
        model.agents[0].pi.bias[:] = torch.tensor([0.0, 100.0, 0.0])
    obs = team_obs([1, 0, 1], [1, 1, 1], rows=200)
    explored, _ = policy.compute_actions(obs, explore=True)  # epsilon 1: uniform legal
    assert set(explored[:, 0].tolist()) == {0, 2}  # a: action 1 masked
    assert set(explored[:, 1].tolist()) == {0, 1}  # b: 2 actions only (3rd beyond its count)
    greedy, extra = policy.compute_actions(obs, explore=False)
    assert (greedy[:, 0] != 1).all() and (greedy[:, 1] == 1).all()
    q = extra["action_dist_inputs"].reshape(200, 2, 3)
    assert (q[:, 0, 1] == MASKED_LOGIT).all() and (q[:, 1, 2] == MASKED_LOGIT).all()


def test_the_target_maximizes_over_legal_actions_only() -> None:
    space = masked_team()
    config = small_config(mixer="vdn", gamma=0.5)
    policy = QMIXPolicy(space, spaces.MultiDiscrete([3, 2]), config, seed=0)
    for net in (policy.model, policy.target_model):
        with torch.no_grad():
            net.agents[0].pi.bias[:] = torch.tensor([0.0, 100.0, 0.0])
    first = team_obs([1, 1, 1], [1, 1, 1])[0]
    after = team_obs([1, 0, 1], [1, 1, 1])[0]  # a may not take action 1 next
    t = {
        OBS: torch.as_tensor(np.stack([first, after]))[None],
        ACTIONS: torch.tensor([[[0, 0], [0, 0]]]),
        REWARDS: torch.tensor([[1.0, 0.0]]),
        "state_in_0": torch.zeros(1, 2, 8),
        SEQ_STEPS: torch.tensor([1]),
        SEQ_TERMINATED: torch.tensor([False]),
    }
    td, mask = policy._sequence_td(t)
    assert mask.tolist() == [[True]]
    with torch.no_grad():
        q, _ = policy.model.agent_q(t[OBS], [t["state_in_0"]])
    q_taken = q[0, 0, :, 0].sum()
    best_next = q[0, 1].max(dim=-1).values  # legal maxima: a's action 1 is MASKED
    assert best_next[0] < 50.0  # the masked 100 is not among them
    expected = q_taken - (1.0 + 0.5 * best_next.sum())
    torch.testing.assert_close(td[0, 0], expected, rtol=1e-5, atol=1e-4)


def test_standardized_rewards_enter_the_target_with_the_running_statistics() -> None:
    space = masked_team()
    config = small_config(mixer="vdn", gamma=0.5, standardize_rewards=True)
    policy = QMIXPolicy(space, spaces.MultiDiscrete([3, 2]), config, seed=0)
    obs = torch.as_tensor(team_obs([1, 1, 1], [1, 1, 1], rows=3))[None].expand(2, -1, -1)
    t = {
        OBS: obs,
        ACTIONS: torch.zeros(2, 3, 2, dtype=torch.long),
        REWARDS: torch.tensor([[1.0, 3.0, 99.0], [5.0, 7.0, 99.0]]),  # 99: beyond the steps
        "state_in_0": torch.zeros(2, 2, 8),
        SEQ_STEPS: torch.tensor([2, 2]),
        SEQ_TERMINATED: torch.tensor([True, True]),
    }
    td, _ = policy._sequence_td(t)
    stats = policy.reward_stats
    assert stats is not None
    # EPyMARL's running moments after one batch of the four steps' rewards (count from 1e-4)
    values = torch.tensor([1.0, 3.0, 5.0, 7.0], dtype=torch.float64)
    n, eps = 4.0, 1e-4
    mean = values.mean() * n / (n + eps)
    var = (1.0 * eps + values.var() * n + values.mean() ** 2 * eps * n / (n + eps)) / (n + eps)
    torch.testing.assert_close(stats.mean, mean)
    torch.testing.assert_close(stats.var, var)
    plain = QMIXPolicy(space, spaces.MultiDiscrete([3, 2]), small_config(mixer="vdn", gamma=0.5))
    plain.model.load_state_dict(policy.model.state_dict(), strict=False)
    plain.target_model.load_state_dict(policy.target_model.state_dict(), strict=False)
    scaled = {**t, REWARDS: ((t[REWARDS] - mean) / var.sqrt()).float()}
    torch.testing.assert_close(td, plain._sequence_td(scaled)[0], rtol=1e-5, atol=1e-5)
    # the statistics are model buffers: they travel with the weights and the checkpoint
    assert {"reward_stats.mean", "reward_stats.var"} <= set(policy.model.state_dict())


def test_a_policy_without_a_team_is_refused_with_the_fix() -> None:
    box = spaces.Box(-1, 1, (4,), np.float32)
    with pytest.raises(ConfigError, match=r"set groups: \{team: \[agent ids\]\}"):
        QMIXPolicy(box, spaces.MultiDiscrete([2, 2]), small_config())
    with pytest.raises(ConfigError, match=r"need Discrete actions for every member"):
        team = GroupAgents(_box_actions_game(), GROUPS).observation_spaces["team"]
        QMIXPolicy(team, spaces.Box(-1, 1, (2,)), small_config())


def _box_actions_game() -> Any:
    return TwoStepGame()


def test_qmix_settings_are_checked_before_anything_starts(local_backend: None) -> None:
    from rlflow.trainer import Trainer

    with pytest.raises(ConfigError, match=r"QMIXConfig\.mixer='sum' must be one of"):
        QMIXConfig(mixer="sum")
    with pytest.raises(ConfigError, match=r"QMIXConfig\.hypernet_layers=3 must be 1 or 2"):
        QMIXConfig(hypernet_layers=3)
    with pytest.raises(ConfigError, match=r"use_lstm is not supported"):
        QMIXConfig(model={"use_lstm": True, "use_gru": False})
    with pytest.raises(ConfigError, match=r"QMIXConfig\.dueling=True is not supported"):
        QMIXConfig(dueling=True)
    with pytest.raises(ConfigError, match=r"observation_filter='MeanStdFilter' is not supported"):
        QMIXConfig(observation_filter="MeanStdFilter")
    assert QMIXConfig().model.use_gru
    with pytest.raises(ConfigError, match=r"set groups"):
        Trainer("qmix", config={"env": "multi_cartpole", "groups": {}}, backend="local")


def test_member_observation_sizes_come_from_the_team_layout() -> None:
    space = masked_team()
    assert [member_observation_size(space, i) for i in range(2)] == [2, 1]


def test_the_two_step_game_pays_the_papers_payoffs() -> None:
    env = TwoStepGame()
    for first, joint, payoff in [
        (0, (0, 1), 7.0),
        (0, (1, 0), 7.0),
        (1, (0, 0), 0.0),
        (1, (0, 1), 1.0),
        (1, (1, 0), 1.0),
        (1, (1, 1), 8.0),
    ]:
        env.reset()
        step = env.step({"agent_0": first, "agent_1": 1 - first})  # agent_1 changes nothing
        assert step.obs["agent_1"].tolist() == ([0, 1, 0] if first == 0 else [0, 0, 1])
        assert sum(step.rewards.values()) == 0.0 and not step.terminateds["__all__"]
        step = env.step({"agent_0": joint[0], "agent_1": joint[1]})
        assert sum(step.rewards.values()) == payoff
        assert step.terminateds["__all__"]
    team = GroupAgents(TwoStepGame(), GROUPS)
    space = team.observation_spaces["team"]
    assert isinstance(space, TeamBox) and space.state_size == 3


def test_exported_members_act_from_their_own_observations(
    local_backend: None, tmp_path: Any
) -> None:
    from rlflow import load_policy
    from rlflow.trainer import Trainer

    config = {
        "env": "two_step_game",
        "groups": GROUPS,
        "seed": 0,
        "replay_sequence_length": 2,
        "rollout_fragment_length": 2,
        "num_envs_per_worker": 4,
        "train_batch_size": 16,
        "learning_starts": 16,
        "min_steps_per_iteration": 64,
        "min_time_s_per_iteration": 0,
        "model": {"hidden": (16,), "lstm_cell_size": 8},
    }
    with Trainer("qmix", config=config, backend="local") as trainer:
        trainer.train()
        path = trainer.export_policy(tmp_path / "team")
        policy = trainer.workers.local_worker().get_policy()
        with pytest.raises(ConfigError, match=r"is a team's export, one policy per member"):
            load_policy(path)
        members = [load_policy(tmp_path / "team" / agent) for agent in GROUPS["team"]]
        assert [m.observation_space.shape for m in members] == [(3,), (3,)]
        assert all(m.action_space == gym.spaces.Discrete(2) for m in members)
        assert all(m.algorithm == "qmix" for m in members)
        env = GroupAgents(TwoStepGame(), GROUPS)
        obs, _ = env.reset()
        team_state = None
        states: list[Any] = [None, None]
        for _ in range(2):
            team_obs_ = obs["team"]
            joint, extra = policy.compute_actions(
                team_obs_[None], explore=False, memory=_memory(team_state)
            )
            team_state = [extra["state_out_0"]]
            own = env.observation_spaces["team"].split(team_obs_).agents
            for i, member in enumerate(members):  # the member's own observation only
                action, states[i] = member.compute_single_action(own[i], state=states[i])
                assert action == joint[0, i]
                np.testing.assert_allclose(states[i][0], team_state[0][0, i], atol=1e-5)
            step = env.step({"team": joint[0]})
            obs = step.obs
        checkpoint = trainer.save(tmp_path / "run")
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from rlflow.cli import main as cli_main

    out = tmp_path / "cli"
    assert cli_main(["export", str(checkpoint), "-o", str(out), "--format", "onnx"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["agent_0", "agent_1", "team.json"]
    for agent in GROUPS["team"]:  # one ONNX file per member, beside its export
        assert (out / agent / "policy.onnx").is_file()
        session = ort.InferenceSession(str(out / agent / "policy.onnx"))
        x = np.eye(3, dtype=np.float32)[[0, 2]]
        outs = session.run(None, {"obs": x, "state_in_0": np.zeros((2, 8), np.float32)})
        actions, _ = load_policy(out / agent).compute_actions(x)
        np.testing.assert_array_equal(outs[0], actions)


def test_a_teams_replay_counts_train_batch_size_and_learning_starts_in_env_steps() -> None:
    from rlflow.algorithms.q_learning.replay import make_replay_buffer
    from rlflow.ops.replay import _ReplayLocal

    config = small_config(replay_sequence_length=5, train_batch_size=20, learning_starts=12)
    buffer = make_replay_buffer(config, multi_agent=True)  # a grouped env is multi-agent
    step = _ReplayLocal(buffer, config.train_batch_size, config.learning_starts, None)
    assert (step.num_items, step.starts) == (4, 3)  # sequences of 5 steps


def _memory(state: Any) -> Any:
    from rlflow.models.memory import RecurrentInputs

    return RecurrentInputs(state) if state is not None else None


def test_without_a_mixer_each_member_learns_its_own_value_from_n_step_targets(
    local_backend: None,
) -> None:
    from rlflow.trainer import Trainer

    config = {
        "mixer": "none",
        "n_step": 2,
        "replay_sequence_length": 2,
        "rollout_fragment_length": 2,
        "num_envs_per_worker": 4,
        "train_batch_size": 16,
        "learning_starts": 16,
        "min_steps_per_iteration": 64,
        "min_time_s_per_iteration": 0,
        "model": {"hidden": (8,), "lstm_cell_size": 8},
    }
    with Trainer("qmix", config=config, backend="local") as trainer:
        trainer.train()
        result = trainer.train()
        policy = trainer.workers.local_worker().get_policy()
    assert policy.model.mixer is None
    assert result["num_env_steps_trained"] > 0
    assert result["info"]["learner"]["default_policy"]["mean_td_error"] > 0

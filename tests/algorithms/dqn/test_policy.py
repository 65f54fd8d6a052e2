"""DQNPolicy: golden double-Q targets and Huber loss on a hand-made network, importance
weights, n-step postprocessing, epsilon schedules, target updates, state, worker integration."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow import replay as replay_pkg
from rlflow.algorithms import DQNConfig
from rlflow.algorithms.dqn.policy import DQNPolicy, huber
from rlflow.data import (
    ACTIONS,
    NEXT_OBS,
    NUM_GRAD_UPDATES,
    OBS,
    REWARDS,
    TERMINATEDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.learner import stats_to_host
from rlflow.ops import keys
from rlflow.ops.keys import TD_ERROR
from rlflow.replay import BATCH_INDEXES, DISCOUNTS, WEIGHTS

pytestmark = pytest.mark.timeout(60)

OBS_1D = gym.spaces.Box(-10.0, 10.0, (1,), dtype=np.float32)
TWO_ACTIONS = gym.spaces.Discrete(2)


def dqn_config(config: dict[str, Any]) -> DQNConfig:
    """A `DQNConfig` with ``config``; unset, the settings these tests were written for: lr 3e-4
    and no gradient clipping."""
    return DQNConfig(**{"lr": 3e-4, "grad_clip": None, **config})


def linear_policy(**config: Any) -> DQNPolicy:
    """Q(s) = [w0 s + b0, w1 s + b1]: no hidden layer, no dueling.

    Online: w = [1, 2], b = [0, 0]. Target: w = [3, -1], b = [0.5, 0].
    """
    cfg = {"model": {"hidden": ()}, "dueling": False, "gamma": 0.9, **config}
    policy = DQNPolicy(OBS_1D, TWO_ACTIONS, dqn_config(cfg), seed=0)
    with torch.no_grad():
        policy.model.advantage.weight.copy_(torch.tensor([[1.0], [2.0]]))
        policy.model.advantage.bias.zero_()
        policy.target_model.advantage.weight.copy_(torch.tensor([[3.0], [-1.0]]))
        policy.target_model.advantage.bias.copy_(torch.tensor([0.5, 0.0]))
    return policy


def transitions(**extra: Any) -> dict[str, torch.Tensor]:
    """Row 0: s=1, a=0, R=1, s'=2, gamma^m=0.9, not done. Row 1: the same but terminated."""
    columns = {
        OBS: np.array([[1.0], [1.0]], dtype=np.float32),
        ACTIONS: np.array([0, 0]),
        REWARDS: np.array([1.0, 1.0], dtype=np.float32),
        NEXT_OBS: np.array([[2.0], [2.0]], dtype=np.float32),
        TERMINATEDS: np.array([False, True]),
        DISCOUNTS: np.array([0.9, 0.9], dtype=np.float32),
        **extra,
    }
    return {k: torch.as_tensor(v) for k, v in columns.items()}


def test_double_q_target_golden_values() -> None:
    # Q(s=1) = [1, 2] -> Q(s, 0) = 1. Online Q(s'=2) = [2, 4] picks a* = 1;
    # target Q(s'=2) = [6.5, -2] -> target = 1 + 0.9 * -2 = -0.8 -> td = 1.8.
    # Terminated row: target = 1 -> td = 0.
    policy = linear_policy(double_q=True)
    td = policy._td_error(transitions(), target_net=policy.target_model)
    assert td.tolist() == pytest.approx([1.8, 0.0])


def test_plain_q_target_takes_the_target_max() -> None:
    # max target Q(s'=2) = 6.5 -> target = 1 + 0.9 * 6.5 = 6.85 -> td = -5.85.
    policy = linear_policy(double_q=False)
    td = policy._td_error(transitions(), target_net=policy.target_model)
    assert td.tolist() == pytest.approx([-5.85, 0.0])


def test_huber_loss_values() -> None:
    assert huber(torch.tensor([0.5, -0.5, 1.8, -5.85])).tolist() == pytest.approx(
        [0.125, 0.125, 1.3, 5.35]
    )
    assert huber(torch.tensor([3.0]), delta=2.0).item() == pytest.approx(4.0)


def test_loss_is_the_mean_huber_of_the_td_errors() -> None:
    policy = linear_policy()
    loss, stats = policy.loss(transitions())
    assert loss.item() == pytest.approx((1.3 + 0.0) / 2)
    stats = stats_to_host(stats)
    assert stats["mean_td_error"] == pytest.approx(0.9)
    assert stats[TD_ERROR].tolist() == pytest.approx([1.8, 0.0])


def test_importance_weights_scale_each_row() -> None:
    policy = linear_policy(double_q=False)
    weights = np.array([0.5, 1.0], dtype=np.float32)
    loss, _ = policy.loss(transitions(**{WEIGHTS: weights}))
    assert loss.item() == pytest.approx(0.5 * 5.35 / 2)
    loss_zero, _ = policy.loss(transitions(**{WEIGHTS: np.zeros(2, dtype=np.float32)}))
    assert loss_zero.item() == 0.0


def test_learn_on_batch_returns_td_errors_and_batch_indexes() -> None:
    policy = linear_policy(lr=1e-3)
    batch = SampleBatch({k: v.numpy() for k, v in transitions().items()})
    batch[BATCH_INDEXES] = np.array([7, 3])
    stats = policy.update.learn_on_batch(batch)
    assert stats[TD_ERROR].tolist() == pytest.approx([1.8, 0.0])
    assert stats[BATCH_INDEXES].tolist() == [7, 3]
    assert {"total_loss", "grad_gnorm", "mean_td_error"} <= set(stats)


def test_column_names_match_the_replay_package_and_ops_keys() -> None:
    assert DISCOUNTS == replay_pkg.DISCOUNTS
    assert WEIGHTS == replay_pkg.WEIGHTS
    assert BATCH_INDEXES == replay_pkg.BATCH_INDEXES
    assert TD_ERROR == keys.TD_ERROR


def fragment(rewards: list[float], terminated_last: bool) -> SampleBatch:
    n = len(rewards)
    terminateds = np.zeros(n, dtype=bool)
    terminateds[-1] = terminated_last
    return SampleBatch(
        {
            OBS: np.arange(n, dtype=np.float32).reshape(n, 1),
            ACTIONS: np.zeros(n, dtype=np.int64),
            REWARDS: np.array(rewards, dtype=np.float32),
            NEXT_OBS: np.arange(1, n + 1, dtype=np.float32).reshape(n, 1),
            TERMINATEDS: terminateds,
        }
    )


def test_postprocess_makes_n_step_transitions() -> None:
    policy = DQNPolicy(OBS_1D, TWO_ACTIONS, dqn_config({"n_step": 2, "gamma": 0.5}), seed=0)
    out = policy.postprocess_trajectory(fragment([1.0, 1.0, 1.0], True), last_value=0.0)
    assert out[REWARDS].tolist() == [1.5, 1.5, 1.0]
    assert out[NEXT_OBS].ravel().tolist() == [2.0, 3.0, 3.0]
    assert out[DISCOUNTS].tolist() == [0.25, 0.25, 0.5]
    assert out[TERMINATEDS].tolist() == [False, True, True]
    assert set(out) == {OBS, ACTIONS, REWARDS, NEXT_OBS, TERMINATEDS, DISCOUNTS}
    # A cut-off fragment (not terminated) bootstraps from its last next observation.
    cut = policy.postprocess_trajectory(fragment([1.0, 1.0], False), last_value=0.0)
    assert cut[TERMINATEDS].tolist() == [False, False]
    assert cut[NEXT_OBS].ravel().tolist() == [2.0, 2.0]


def test_worker_side_prioritization_adds_initial_priorities() -> None:
    policy = DQNPolicy(
        OBS_1D, TWO_ACTIONS, dqn_config({"worker_side_prioritization": True}), seed=0
    )
    out = policy.postprocess_trajectory(fragment([1.0, 0.0, 2.0], True), last_value=0.0)
    assert out[WEIGHTS].shape == (3,) and np.all(out[WEIGHTS] > 0)


def test_epsilon_follows_the_pushed_timestep() -> None:
    cfg = {"initial_epsilon": 1.0, "final_epsilon": 0.1, "epsilon_timesteps": 10_000}
    policy = DQNPolicy(OBS_1D, TWO_ACTIONS, dqn_config(cfg), seed=0)
    assert policy.epsilon() == 1.0
    policy.on_global_var_update({"timestep": 5000})
    assert policy.epsilon() == pytest.approx(0.55)
    policy.compute_actions(np.zeros((100, 1), dtype=np.float32))  # 100 more steps acted
    assert policy.timestep == 5100
    policy.on_global_var_update({"timestep": 20_000})
    assert policy.epsilon() == pytest.approx(0.1)


def test_per_worker_epsilons_of_ape_x() -> None:
    def eps(index: int) -> float:
        cfg = dqn_config({"per_worker_exploration": True, "num_workers": 3})
        return DQNPolicy(OBS_1D, TWO_ACTIONS, cfg, seed=0, worker_index=index).epsilon()

    assert [eps(i) for i in (1, 2, 3)] == pytest.approx([0.4, 0.4**4.5, 0.4**8])


def test_explore_is_random_with_epsilon_one_and_greedy_without() -> None:
    policy = linear_policy(initial_epsilon=1.0, epsilon_timesteps=10**9)
    obs = np.ones((2000, 1), dtype=np.float32)  # greedy action is 1 (Q = [1, 2])
    explored, extra = policy.compute_actions(obs)
    assert 0.4 < explored.mean() < 0.6
    greedy, _ = policy.compute_actions(obs, explore=False)
    assert greedy.tolist() == [1] * 2000
    assert extra["action_dist_inputs"][0].tolist() == [1.0, 2.0]


def test_update_target_and_state_round_trip() -> None:
    policy = DQNPolicy(OBS_1D, TWO_ACTIONS, dqn_config({}), seed=0)
    other = DQNPolicy(OBS_1D, TWO_ACTIONS, dqn_config({}), seed=1)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(1.0)
    before = [p.clone() for p in policy.target_model.parameters()]
    policy.update_target()
    after = list(policy.target_model.parameters())
    assert not torch.equal(before[0], after[0])
    assert all(torch.equal(a, b) for a, b in zip(after, policy.model.parameters(), strict=True))
    policy.on_global_var_update({"timestep": 123})
    other.set_state(policy.get_state())
    assert other.timestep == 123
    for a, b in zip(other.target_model.parameters(), after, strict=True):
        assert torch.equal(a, b)
    assert set(policy.get_weights()) == set(policy.model.state_dict())


def test_dqn_rejects_bad_config() -> None:
    with pytest.raises(ConfigError, match="n_step"):
        DQNPolicy(OBS_1D, TWO_ACTIONS, dqn_config({"n_step": 0}))
    with pytest.raises(ConfigError, match="Discrete"):
        DQNPolicy(OBS_1D, gym.spaces.Box(-1, 1, (2,)), dqn_config({}))
    with pytest.raises(ConfigError, match="final_epsilon"):
        DQNPolicy(OBS_1D, TWO_ACTIONS, dqn_config({"final_epsilon": 2.0}))


def test_dueling_head_combines_value_and_advantage() -> None:
    policy = DQNPolicy(
        OBS_1D, TWO_ACTIONS, dqn_config({"model": {"hidden": ()}, "dueling": True}), seed=0
    )
    net = policy.model
    assert net.value is not None
    with torch.no_grad():
        net.advantage.weight.copy_(torch.tensor([[1.0], [3.0]]))
        net.advantage.bias.zero_()
        net.value.weight.fill_(10.0)
        net.value.bias.zero_()
    # s = 1: A = [1, 3], mean 2, V = 10 -> Q = [9, 11]
    assert net(torch.tensor([[1.0]])).tolist() == [[9.0, 11.0]]


def test_rollout_worker_gives_next_obs_and_forwards_global_vars(local_backend: None) -> None:
    from rlflow.algorithms import DQNConfig
    from rlflow.testing.envs import CountingEnv
    from rlflow.workers import RolloutWorker

    config = DQNConfig(
        env=CountingEnv,
        env_config={"episode_len": 3},
        num_envs_per_worker=2,
        rollout_fragment_length=4,
        n_step=2,
        gamma=0.5,
    )
    worker = RolloutWorker(config, DQNPolicy, worker_index=1)
    batch = worker.sample()
    assert set(batch) == {OBS, ACTIONS, REWARDS, NEXT_OBS, TERMINATEDS, DISCOUNTS, NUM_GRAD_UPDATES}
    assert batch.count == 8
    # Each env: obs 0,1,2 (episode of 3) then 0; next obs 1,2,3 then 1.
    assert batch[NEXT_OBS][:4].ravel().tolist() == [2.0, 3.0, 3.0, 1.0]
    assert batch[REWARDS][:4].tolist() == [1.5, 1.5, 1.0, 1.0]
    policy = worker.get_policy()
    assert isinstance(policy, DQNPolicy)
    worker.set_weights(worker.get_weights(), {"timestep": 5000})
    assert policy.timestep == 5000


def test_docstring_examples_run() -> None:
    import doctest

    # DQN's policy and the replay family's training-intensity weights.
    from rlflow.algorithms.dqn import policy as dqn_policy_module
    from rlflow.algorithms.q_learning import replay as q_learning_replay

    for module in (dqn_policy_module, q_learning_replay):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0

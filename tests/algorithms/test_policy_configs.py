"""Every algorithm's policy reads its settings from its typed config (issue 10, part 1).

For each registered algorithm, a config with every field the policy reads changed from the
config class's default is resolved on the driver (`rlflow.config.resolve_policies`, as a rollout
worker does) and the built policy is checked to use each value: an attribute, the optimizer's
learning rate, the model's shape or the loss.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlflow.algorithms import ALGORITHMS
from rlflow.algorithms.alpha_zero import AlphaZeroPolicy
from rlflow.algorithms.apex_td3 import ApexTD3Policy
from rlflow.algorithms.appo import APPOPolicy
from rlflow.algorithms.ars import ARSPolicy
from rlflow.algorithms.cql import CQLPolicy
from rlflow.algorithms.dqn import DQNPolicy
from rlflow.algorithms.dreamerv3 import DreamerV3Policy
from rlflow.algorithms.es import ESPolicy
from rlflow.algorithms.impala import VTracePolicy
from rlflow.algorithms.maddpg import MADDPGPolicy
from rlflow.algorithms.maml import MAMLPolicy
from rlflow.algorithms.mappo.policy import MAPPOPolicy
from rlflow.algorithms.marwil import MARWILPolicy
from rlflow.algorithms.matd3 import MATD3Policy
from rlflow.algorithms.pg import PGPolicy
from rlflow.algorithms.ppo import PPOPolicy
from rlflow.algorithms.ppo_dqn import DQN_POLICY, PPO_POLICY
from rlflow.algorithms.qmix.policy import QMIXPolicy
from rlflow.algorithms.r2d2.policy import R2D2Policy
from rlflow.algorithms.sac import SACPolicy
from rlflow.algorithms.td3 import TD3Policy
from rlflow.algorithms.twin_q.policy import TwinQPolicy
from rlflow.config import AlgorithmConfig, resolve_policies
from rlflow.envs.flatten import ActionMaskBox
from rlflow.envs.groups import TeamBox
from rlflow.policy import TorchPolicy

pytestmark = pytest.mark.timeout(120)

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)
ACT_SPACE = gym.spaces.Discrete(2)
# AlphaZero's network takes a board with its action mask last (a game's observations).
MASKED_OBS_SPACE = ActionMaskBox(
    np.zeros(5, np.float32), np.ones(5, np.float32), action_mask_size=2
)
BOX_ACT_SPACE = gym.spaces.Box(-2.0, 2.0, (2,), dtype=np.float32)
"""SAC and TD3 take Box actions only."""
TEAM_OBS_SPACE = TeamBox(
    -np.ones(12, np.float32),
    np.ones(12, np.float32),
    agent_ids=["a", "b"],
    agent_obs_size=3,
    agent_mask_size=0,
    state_size=6,
    agent_action_sizes=[2, 2],
)
"""MAPPO, MADDPG and MATD3 take a team's observations (`rlflow.envs.groups`): two members of 3
values, a state of 6."""
TEAM_ACT_SPACE = gym.spaces.MultiDiscrete([2, 2])


def _team_spaces() -> tuple[gym.Space[Any], gym.Space[Any]]:
    """A team's spaces (QMIX, VDN): the two-step game's two agents, grouped."""
    from rlflow.envs.groups import GroupAgents
    from rlflow.envs.ma_envs import TwoStepGame

    env = GroupAgents(TwoStepGame(), {"team": ["agent_0", "agent_1"]})
    return env.observation_spaces["team"], env.action_spaces["team"]


def _qmix_mixer(check: Callable[[Any, Any], bool]) -> Check:
    """``check`` on QMIX's mixer (VDN's sum has none of its settings)."""
    return lambda p, v: p.config.mixer != "qmix" or check(p.model.mixer, v)


Check = Callable[[Any, Any], bool]
"""``check(policy, value)``: does the policy use ``value``?"""


def _flip(default: Any) -> Any:
    return not default


def _lr(policy: TorchPolicy, value: float) -> bool:
    return bool(policy.update.lr == value == policy.update.optimizer.param_groups[0]["lr"])


def _hidden(policy: TorchPolicy, value: dict[str, Any]) -> bool:
    widths = {p.shape[0] for p in policy.model.parameters() if p.ndim == 2}
    acts = {type(m).__name__.lower() for m in policy.model.modules()}
    shared = getattr(policy.model, "trunk", None) is not None
    return (
        value["hidden"][0] in widths
        and value["activation"] in acts
        and ("shared" not in value or shared == value["shared"])
    )


def _cell(cls: type, size: int) -> Check:
    def check(policy: TorchPolicy, value: Any) -> bool:
        cell = getattr(policy.model, "cell", None)
        return isinstance(cell, cls) and cell.hidden_size == size

    return check


def _reads(policy: TorchPolicy, value: Any, field: str = "") -> bool:
    """The policy reads ``field`` from its typed config where it needs it (its losses and
    acting read ``self.config``): the config it holds has the value."""
    return bool(getattr(policy.config, field) == value)


def _uses(check: Check, policy: TorchPolicy, field: str, value: Any) -> bool:
    return _reads(policy, value, field) if check is _reads else check(policy, value)


def _threads(policy: TorchPolicy, value: int) -> bool:
    return torch.get_num_threads() == value


# (field, new value from the config class's default, check)
BASE: list[tuple[str, Callable[[Any], Any], Check]] = [
    ("lr", lambda d: 0.0123, _lr),
    ("gamma", lambda d: 0.77, _reads),
    ("grad_clip", lambda d: 3.5, _reads),
    ("num_torch_threads", lambda d: 2, _threads),
]
ACTOR_CRITIC = [
    ("model", lambda d: {"hidden": (7,), "activation": "relu", "shared": True}, _hidden),
    ("use_critic", _flip, lambda p, v: p.use_critic == v),
    ("use_gae", _flip, _reads),
    ("lambda_", lambda d: 0.55, _reads),
]
COEFFS = [
    ("vf_loss_coeff", lambda d: 0.345, _reads),
    ("entropy_coeff", lambda d: 0.0234, lambda p, v: p.entropy_coeff == v),
]
VTRACE = [
    ("model", lambda d: {"hidden": (7,), "activation": "relu"}, _hidden),
    ("vtrace_clip_rho_threshold", lambda d: 0.6, _reads),
    ("vtrace_clip_pg_rho_threshold", lambda d: 0.7, _reads),
    *COEFFS,
]
TWIN_Q = [
    ("lr", lambda d: 0.0123, _lr),
    ("gamma", lambda d: 0.77, _reads),
    ("grad_clip", lambda d: 3.5, _reads),
    ("num_torch_threads", lambda d: 2, _threads),
    ("model", lambda d: {"hidden": (7,), "activation": "tanh"}, _hidden),
    ("actor_lr", lambda d: 0.0456, lambda p, v: p.update.optimizer.param_groups[1]["lr"] == v),
    ("tau", lambda d: 0.25, _reads),
    ("twin_q", _flip, lambda p, v: (len(p.net.critics) == 2) == v),
    ("n_step", lambda d: 4, _reads),
]
TD3 = [
    *TWIN_Q,
    ("policy_delay", lambda d: 3, _reads),
    ("target_noise", lambda d: 0.3, _reads),
    ("target_noise_clip", lambda d: 0.4, _reads),
    ("exploration_noise", lambda d: 0.2, _reads),
]
MADDPG = [
    *[field for field in TWIN_Q if field[0] != "twin_q"],
    ("twin_q", _flip, lambda p, v: (len(p.net.critics[0]) == 2) == v),
    ("exploration_noise", lambda d: 0.2, _reads),
    ("gumbel_temperature", lambda d: 0.5, _reads),
    ("actor_regularization", lambda d: 0.01, _reads),
    (
        "critic_input",
        lambda d: "state_and_observations",
        lambda p, v: p.critic_input_size() == 2 * 3 + 6 + 4,  # the state's 6 values in
    ),
]
FIELDS: dict[type, list[tuple[str, Callable[[Any], Any], Check]]] = {
    MADDPGPolicy: MADDPG,
    MATD3Policy: [
        *MADDPG,
        ("policy_delay", lambda d: 3, _reads),
        ("target_noise", lambda d: 0.3, _reads),
        ("target_noise_clip", lambda d: 0.4, _reads),
    ],
    SACPolicy: [
        *TWIN_Q,
        ("initial_alpha", lambda d: 0.3, lambda p, v: abs(p.alpha - v) < 1e-6),
        ("target_entropy", lambda d: -0.5, lambda p, v: p.target_entropy == v),
        ("alpha_lr", lambda d: 0.0789, lambda p, v: p.update.optimizer.param_groups[2]["lr"] == v),
    ],
    CQLPolicy: [
        *TWIN_Q,
        ("min_q_weight", lambda d: 2.5, _reads),
        ("num_actions", lambda d: 4, _reads),
        ("temperature", lambda d: 0.5, _reads),
        ("bc_iters", lambda d: 77, _reads),
    ],
    TD3Policy: TD3,
    ApexTD3Policy: [
        *TD3,
        ("worker_noise", lambda d: 0.3, _reads),
        ("worker_noise_alpha", lambda d: 2.0, _reads),
        ("per_worker_exploration", _flip, _reads),
    ],
    PGPolicy: [*BASE, *ACTOR_CRITIC, *COEFFS],
    PPOPolicy: [
        *BASE,
        *ACTOR_CRITIC,
        *COEFFS,
        ("clip_param", lambda d: 0.15, _reads),
        ("vf_clip_param", lambda d: 4.5, _reads),
        ("kl_coeff", lambda d: 0.45, lambda p, v: p.kl_coeff == v),
        ("kl_target", lambda d: 0.035, _reads),
    ],
    MAPPOPolicy: [
        *BASE,
        ("model", lambda d: {"hidden": (7,), "activation": "relu"}, _hidden),
        ("use_gae", _flip, _reads),
        ("lambda_", lambda d: 0.55, _reads),
        *COEFFS,
        ("clip_param", lambda d: 0.15, _reads),
        ("vf_clip_param", lambda d: 4.5, _reads),
        ("kl_coeff", lambda d: 0.45, lambda p, v: p.kl_coeff == v),
        ("kl_target", lambda d: 0.035, _reads),
        ("share_policy", _flip, lambda p, v: (len(p.model.actors.nets) == 1) == v),
        ("agent_id_input", _flip, lambda p, v: p.model.actors.agent_id_input == v),
        ("clip_per_agent", _flip, _reads),
        ("use_valuenorm", _flip, lambda p, v: (p.model.value_norm is not None) == v),
        ("valuenorm_beta", lambda d: 0.99, _reads),
        ("use_huber_loss", _flip, _reads),
        ("vf_huber_delta", lambda d: 2.5, _reads),
    ],
    DQNPolicy: [
        *BASE,
        ("model", lambda d: {"hidden": (7,), "activation": "tanh"}, _hidden),
        ("n_step", lambda d: 4, _reads),
        ("double_q", _flip, _reads),
        ("dueling", _flip, lambda p, v: (p.model.value is not None) == v),
        ("huber_delta", lambda d: 2.5, _reads),
        ("initial_epsilon", lambda d: 0.9, _reads),
        ("final_epsilon", lambda d: 0.05, _reads),
        ("epsilon_timesteps", lambda d: 777, _reads),
        ("prioritized_replay_eps", lambda d: 1e-3, _reads),
        ("worker_side_prioritization", _flip, _reads),
        ("per_worker_exploration", _flip, lambda p, v: (p.fixed_epsilon is not None) == v),
    ],
    R2D2Policy: [
        *BASE,
        ("model", lambda d: {"use_gru": True, "lstm_cell_size": 9}, _cell(nn.GRU, 9)),
        ("n_step", lambda d: 4, _reads),
        ("double_q", _flip, _reads),
        ("dueling", _flip, _reads),
        ("huber_delta", lambda d: 2.5, _reads),
        ("initial_epsilon", lambda d: 0.9, _reads),
        ("final_epsilon", lambda d: 0.05, _reads),
        ("epsilon_timesteps", lambda d: 777, _reads),
        ("prioritized_replay_eps", lambda d: 1e-3, _reads),
        ("per_worker_exploration", _flip, lambda p, v: (p.fixed_epsilon is not None) == v),
        ("burn_in", lambda d: 3, _reads),
        ("h_function_epsilon", lambda d: 0.01, lambda p, v: p.h_epsilon == v),
        ("priority_eta", lambda d: 0.5, _reads),
    ],
    QMIXPolicy: [
        *BASE,
        ("model", lambda d: {"hidden": (7,), "activation": "tanh"}, _hidden),
        ("n_step", lambda d: 4, _reads),
        ("double_q", _flip, _reads),
        ("huber_delta", lambda d: 2.5, _reads),
        ("td_loss", lambda d: "huber", _reads),
        ("standardize_rewards", _flip, lambda p, v: (p.reward_stats is not None) == v),
        ("initial_epsilon", lambda d: 0.9, _reads),
        ("final_epsilon", lambda d: 0.07, _reads),
        ("epsilon_timesteps", lambda d: 777, _reads),
        ("replay_sequence_length", lambda d: 9, lambda p, v: p.max_seq_len == v),
        ("share_parameters", _flip, lambda p, v: (len(p.model.agents) == 1) == v),
        ("obs_agent_id", _flip, _reads),
        ("mixing_embed_dim", lambda d: 5, _qmix_mixer(lambda m, v: m.embed_dim == v)),
        (
            "hypernet_embed",
            lambda d: 11,
            _qmix_mixer(lambda m, v: m.hyper_w_1[0].out_features == v),
        ),
    ],
    VTracePolicy: VTRACE,
    APPOPolicy: [
        *VTRACE,
        ("clip_param", lambda d: 0.15, _reads),
        ("use_kl_loss", _flip, _reads),
        ("kl_coeff", lambda d: 0.45, _reads),
    ],
    MARWILPolicy: [
        *BASE,
        ("model", lambda d: {"hidden": (7,), "activation": "relu"}, _hidden),
        *COEFFS,
        ("beta", lambda d: 0.7, _reads),
        ("moving_average_sqd_adv_norm_start", lambda d: 50.0, lambda p, v: p.sqd_adv_norm == v),
        (
            "moving_average_sqd_adv_norm_update_rate",
            lambda d: 0.01,
            _reads,
        ),
        ("max_advantage_weight", lambda d: 7.0, _reads),
    ],
    AlphaZeroPolicy: [
        ("lr", lambda d: 0.0123, _lr),
        ("grad_clip", lambda d: 3.5, _reads),
        ("num_torch_threads", lambda d: 2, _threads),
        ("model", lambda d: {"hidden": (7,), "activation": "elu"}, _hidden),
        ("l2_regularization", lambda d: 0.25, _reads),
        ("value_loss_coeff", lambda d: 0.5, _reads),
    ],
    DreamerV3Policy: [
        ("lr", lambda d: 0.0123, _lr),
        ("gamma", lambda d: 0.77, _reads),
        ("grad_clip", lambda d: 3.5, _reads),
        ("num_torch_threads", lambda d: 2, _threads),
        ("model_size", lambda d: "S", lambda p, v: p.model.rssm.gru.hidden_size == 512),
        ("actor_lr", lambda d: 0.0234, lambda p, v: p.update.optimizer.param_groups[1]["lr"] == v),
        ("critic_lr", lambda d: 0.0345, lambda p, v: p.update.optimizer.param_groups[2]["lr"] == v),
        ("unimix", lambda d: 0.05, lambda p, v: p.model.rssm.unimix == v == p.model.unimix),
        ("imagination_horizon", lambda d: 7, _reads),
        ("gae_lambda", lambda d: 0.5, _reads),
        ("entropy_scale", lambda d: 0.01, _reads),
        ("free_nats", lambda d: 0.5, _reads),
        ("kl_dyn_scale", lambda d: 0.4, _reads),
        ("kl_rep_scale", lambda d: 0.2, _reads),
        ("return_normalization_decay", lambda d: 0.9, _reads),
        ("slow_critic_decay", lambda d: 0.9, _reads),
        ("slow_critic_regularizer", lambda d: 0.5, _reads),
    ],
    ESPolicy: [
        ("model", lambda d: {"hidden": (7,), "activation": "relu"}, _hidden),
        ("num_torch_threads", lambda d: 2, _threads),
        ("stepsize", lambda d: 0.0321, lambda p, v: p.optimizer.stepsize == v),
    ],
    ARSPolicy: [
        ("model", lambda d: {"hidden": (7,), "activation": "relu"}, _hidden),
        ("num_torch_threads", lambda d: 2, _threads),
    ],
    MAMLPolicy: [
        *BASE,
        ("model", lambda d: {"hidden": (7,), "activation": "relu"}, _hidden),
        ("inner_lr", lambda d: 0.33, _reads),
        ("clip_param", lambda d: 0.15, _reads),
        ("kl_coeff", lambda d: 0.45, lambda p, v: p.kl_coeff == v),
        ("kl_target", lambda d: 0.035, _reads),
    ],
}


def changed(config_cls: type[AlgorithmConfig], policy_cls: type) -> dict[str, Any]:
    """A value different from ``config_cls``'s default for every field ``policy_cls`` reads."""
    defaults = {f.name: f for f in dataclasses.fields(config_cls)}
    out: dict[str, Any] = {}
    for name, new, _ in FIELDS[policy_cls]:
        field = defaults[name]
        default = field.default_factory() if callable(field.default_factory) else field.default
        out[name] = new(default)
        assert out[name] != default, (config_cls.__name__, name)
    return out


def _consistent(values: dict[str, Any]) -> dict[str, Any]:
    # GAE needs a critic: flipping both keeps the pair valid either way.
    if "use_gae" in values and "use_critic" in values:
        values["use_gae"] = values["use_gae"] and values["use_critic"]
    return values


@pytest.fixture(autouse=True)
def _restore_threads() -> Any:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_policy_uses_every_setting_of_its_config(name: str) -> None:
    spec = ALGORITHMS[name]
    if name == "ppo_dqn":
        ppo_cls, dqn_cls = PPOPolicy.config_class, DQNPolicy.config_class
        ppo = _consistent(changed(ppo_cls, PPOPolicy))
        dqn = changed(dqn_cls, DQNPolicy)
        shared = {k: dqn.pop(k) for k in ("num_torch_threads",)}
        ppo.pop("num_torch_threads")
        config = spec.config_cls(ppo=ppo, dqn=dqn, **shared)
        expected = {PPO_POLICY: {**ppo, **shared}, DQN_POLICY: {**dqn, **shared}}
    else:
        values = _consistent(changed(spec.config_cls, spec.policy_cls))
        if name == "bc":
            values.pop("beta")  # bc is MARWIL with beta 0, and refuses any other
        if name == "ddppo":
            values.pop("kl_coeff")  # DD-PPO has no KL penalty, and refuses any
        config = spec.config_cls(**values, num_workers=3)
        expected = {"default_policy": values}
    resolved = resolve_policies(config, spec.policy_cls)
    assert set(resolved) == set(expected)
    for pid, (cls, policy_config) in resolved.items():
        assert isinstance(policy_config, cls.config_class)
        obs_space, act_space = OBS_SPACE, ACT_SPACE
        if issubclass(cls, TwinQPolicy):
            act_space = BOX_ACT_SPACE
        if cls is MAPPOPolicy or issubclass(cls, MADDPGPolicy):  # a team of two
            obs_space, act_space = TEAM_OBS_SPACE, TEAM_ACT_SPACE
        if name == "alpha_zero":
            obs_space = MASKED_OBS_SPACE
        if issubclass(cls, QMIXPolicy):
            obs_space, act_space = _team_spaces()
        policy = cls(obs_space, act_space, policy_config, seed=0, worker_index=2)
        assert policy.worker_index == 2
        unused = [
            field
            for field, _, check in FIELDS[cls]
            if field in expected[pid] and not _uses(check, policy, field, expected[pid][field])
        ]
        assert unused == [], f"{name}/{pid}: the policy ignores {unused}"


def test_dqn_per_worker_epsilon_reads_the_worker_index() -> None:
    config = ALGORITHMS["apex"].config_cls(
        num_workers=3, worker_epsilon=0.5, worker_epsilon_alpha=2
    )
    epsilons = [
        DQNPolicy(OBS_SPACE, ACT_SPACE, config, seed=0, worker_index=i).epsilon() for i in (1, 2, 3)
    ]
    assert epsilons == pytest.approx([0.5, 0.5**2, 0.5**3])
    learner = DQNPolicy(OBS_SPACE, ACT_SPACE, config, seed=0)  # index 0: the schedule
    assert learner.fixed_epsilon is None


def test_policy_takes_only_its_config_class() -> None:
    with pytest.raises(TypeError, match=r"PPOPolicy\(config\)=.* must be a PPOConfig"):
        PPOPolicy(OBS_SPACE, ACT_SPACE, {"lr": 0.1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a PPOConfig"):
        PPOPolicy(OBS_SPACE, ACT_SPACE, ALGORITHMS["pg"].config_cls())  # type: ignore[arg-type]

"""The tuned Atari configs (issue 44, item 6), unit tier: PPO and DQN on ``ALE/Pong-v5`` and
``ALE/Breakout-v5`` hold rl-baselines3-zoo's "atari" entries, IMPALA and APPO on Breakout
RLlib's tuned examples' learning settings at the sizes of IMPALA's 2-core Pong config; ``rlflow
train ALGO --env ALE/Breakout-v5`` applies them; one iteration of each trains on the real game
(ale-py ships the ROMs) with finite losses. Learning on them is not tested here: a 2-core
machine samples a few hundred env steps per second, and the sources' budgets are 10M steps."""

from __future__ import annotations

import math

import pytest

from rlflow import Trainer, flow
from rlflow.algorithms import tuned_config
from rlflow.cli.parser import build_parser
from rlflow.cli.resolve import resolve_run
from rlflow.config.files import tuned_config_path

pytestmark = pytest.mark.timeout(120)

PONG, BREAKOUT = "ALE/Pong-v5", "ALE/Breakout-v5"
CASES = [
    ("ppo", PONG),
    ("ppo", BREAKOUT),
    ("dqn", PONG),
    ("dqn", BREAKOUT),
    ("impala", BREAKOUT),
    ("appo", BREAKOUT),
]
LOSSES = {
    "ppo": ("policy_loss", "vf_loss", "entropy"),
    "dqn": ("mean_td_error",),
    "impala": ("policy_loss", "vf_loss", "entropy"),
    "appo": ("policy_loss", "vf_loss", "entropy"),
}
# One iteration, small: a short PPO batch; replay learning after 64 steps, not 100,000; a few
# envs per worker and short IMPALA/APPO iterations.
SMALL = {
    "ppo": {
        "num_envs_per_worker": 1,
        "rollout_fragment_length": 32,
        "train_batch_size": 64,
        "sgd_minibatch_size": 32,
        "num_sgd_iter": 1,
    },
    "dqn": {"buffer_size": 1000, "learning_starts": 64},
    "impala": {"num_envs_per_worker": 2, "min_time_s_per_iteration": 0.0},
    "appo": {"num_envs_per_worker": 2, "min_time_s_per_iteration": 0.0},
}


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_pong_and_breakout_share_the_zoos_one_atari_entry(algo: str) -> None:
    assert tuned_config(algo, PONG) == tuned_config(algo, BREAKOUT).replace(env=PONG)


def test_ppo_holds_the_zoo_atari_settings() -> None:
    config = tuned_config("ppo", BREAKOUT)
    # n_envs 8 x n_steps 128, batch_size 256, n_epochs 4
    workers = config.num_workers * config.num_envs_per_worker
    assert (workers, config.rollout_fragment_length, config.train_batch_size) == (8, 128, 1024)
    assert (config.sgd_minibatch_size, config.num_sgd_iter) == (256, 4)
    # learning_rate lin_2.5e-4 over n_timesteps 1e7; clip_range 0.1 (not annealed here)
    assert config.lr_schedule == [[0, 2.5e-4], [10_000_000, 0.0]]
    assert (config.clip_param, config.vf_loss_coeff, config.entropy_coeff) == (0.1, 0.5, 0.01)
    # SB3's defaults: gamma, gae_lambda, max_grad_norm, no target_kl, no clip_range_vf
    assert (config.gamma, config.lambda_, config.grad_clip) == (0.99, 0.95, 0.5)
    assert config.kl_coeff == 0.0 and config.vf_clip_param is None


def test_dqn_holds_the_zoo_atari_settings_with_a_buffer_that_fits() -> None:
    config = tuned_config("dqn", BREAKOUT)
    # Nature DQN: SB3's DQN has no double Q, dueling heads, n-step or prioritized replay
    assert not (config.double_q or config.dueling or config.prioritized_replay)
    assert config.n_step == 1
    # train_freq 4, batch_size 32, gradient_steps 1 (the native ratio), lr 1e-4
    assert (config.rollout_fragment_length, config.train_batch_size) == (4, 32)
    assert config.training_intensity is None and config.lr == 1e-4
    assert (config.buffer_size, config.learning_starts) == (100_000, 100_000)
    assert config.target_network_update_freq == 1000
    # exploration_fraction 0.1 of 1e7 steps, 1.0 -> 0.01; SB3's max_grad_norm 10
    assert (config.initial_epsilon, config.final_epsilon) == (1.0, 0.01)
    assert config.epsilon_timesteps == 1_000_000 and config.grad_clip == 10.0


def test_impala_and_appo_on_breakout_hold_rllibs_settings_at_the_2_core_sizes() -> None:
    impala, appo = tuned_config("impala", BREAKOUT), tuned_config("appo", BREAKOUT)
    pong = tuned_config("impala", PONG)  # the sizes measured to learn on a 2-core CPU
    for config in (impala, appo):
        sizes = ("num_workers", "num_envs_per_worker", "rollout_fragment_length")
        assert [getattr(config, k) for k in sizes] == [getattr(pong, k) for k in sizes]
        assert config.train_batch_size == pong.train_batch_size
    # atari-impala.yaml: lr 5e-4 to ~0 over 20M steps; RLlib's IMPALA defaults
    assert impala.lr_schedule == [[0, 5e-4], [20_000_000, 1e-12]]
    assert (impala.vf_loss_coeff, impala.entropy_coeff, impala.grad_clip) == (0.5, 0.01, 40.0)
    # pong-appo.yaml: num_sgd_iter 2, vf_loss_coeff 1.0, clip_param 0.3, grad_clip 10, no KL
    assert (appo.num_sgd_iter, appo.vf_loss_coeff, appo.clip_param) == (2, 1.0, 0.3)
    assert appo.grad_clip == 10.0 and appo.use_kl_loss is False


@pytest.mark.parametrize(("algo", "env"), CASES)
def test_the_file_is_named_for_the_env_and_the_cli_applies_it(algo: str, env: str) -> None:
    path = tuned_config_path(algo, env)
    assert path is not None and path.name == env.replace("/", "-") + ".yaml"
    pytest.importorskip("ale_py")  # resolving the run checks the env id with Gymnasium
    spec = resolve_run(build_parser().parse_args(["train", algo, "--env", env]))
    assert spec.config == tuned_config(algo, env)


@pytest.mark.parametrize(("algo", "env"), CASES)
def test_one_iteration_trains_on_the_game_with_finite_losses(algo: str, env: str) -> None:
    pytest.importorskip("ale_py")
    flow.init(backend="local")
    config = tuned_config(algo, env, min_steps_per_iteration=128, **SMALL[algo])
    with Trainer(algo, backend="local", config=config) as trainer:
        result = trainer.train()
    assert result["num_env_steps_trained"] > 0
    stats = result["info"]["learner"]["default_policy"]
    for key in LOSSES[algo]:
        assert math.isfinite(stats[key]), (key, stats)

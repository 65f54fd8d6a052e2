"""PPO + DQN composed over one worker set (issue 6): config, plan behaviour, learning.

Learning target: on multi-agent CartPole with 2 agents (agent_0 -> PPO, agent_1 -> DQN, poles
respawn), each policy's mean return reaches 150 within 300k env steps (local backend, seed 0,
the shipped tuned config). Run::

    python -m pytest tests/algorithms/test_ppo_dqn.py -m learning -s
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlflow.algorithms import DQNConfig, PPOConfig, get_algorithm, tuned_config
from rlflow.algorithms.dqn.policy import DQNPolicy
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.algorithms.ppo_dqn import DQN_POLICY, PPO_POLICY, PPODQNConfig, ppo_dqn_mapping
from rlflow.algorithms.ppo_dqn.config import COLLECTION_FIELDS
from rlflow.errors import ConfigError
from rlflow.ops import keys
from rlflow.testing.learning import train_to_target
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(300)

SPEC = get_algorithm("ppo_dqn")
SPEC_IDS = (PPO_POLICY, DQN_POLICY)
ROUND = 2 * 8  # env steps per sampling round: 2 envs x 8 steps, on the learner
SMALL: dict[str, Any] = {
    "env_config": {"num_agents": 2, "respawn": True, "horizon": 20},
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 8,
    "ppo": {"train_batch_size": 4 * ROUND, "sgd_minibatch_size": 16, "num_sgd_iter": 2},
    "dqn": {
        "train_batch_size": 8,
        "learning_starts": 1,
        "buffer_size": 1000,
        "target_network_update_freq": 0,
    },
    "model": {"hidden": (8,)},
    "min_time_s_per_iteration": 0.0,  # one result per train item, not per second
}


# ------------------------------------------------------------------------------ config
def test_mapping_sends_even_agents_to_ppo_and_odd_ones_to_dqn() -> None:
    assert [ppo_dqn_mapping(f"agent_{i}") for i in range(4)] == [
        PPO_POLICY,
        DQN_POLICY,
        PPO_POLICY,
        DQN_POLICY,
    ]
    with pytest.raises(ConfigError, match="'red' does not end in a number"):
        ppo_dqn_mapping("red")


def test_config_builds_one_spec_per_learner_from_its_own_settings() -> None:
    config = PPODQNConfig(ppo={"lr": 0.01}, dqn={"n_step": 2}, seed=7)
    assert list(config.policy_specs()) == [PPO_POLICY, DQN_POLICY]
    assert config.policy_specs()[PPO_POLICY].policy_class is PPOPolicy
    assert config.policy_specs()[DQN_POLICY].policy_class is DQNPolicy
    assert config.ppo.lr == 0.01 and config.ppo.seed == 7
    assert config.dqn.n_step == 2 and config.dqn.seed == 7
    # Round trips through to_dict (the CLI and checkpoints) and replace keep the learners.
    again = PPODQNConfig.from_dict(config.to_dict())
    assert again.ppo == config.ppo
    assert config.replace(dqn={"n_step": 3}).dqn.n_step == 3


def test_learner_configs_are_typed_with_the_runs_collection_fields() -> None:
    default = PPODQNConfig()
    collection = {k: getattr(default, k) for k in COLLECTION_FIELDS}
    assert collection["env"] == "multi_cartpole"
    assert default.ppo == PPOConfig.from_dict(collection)
    assert default.dqn == DQNConfig.from_dict(collection)
    # A whole config takes the run's collection fields and keeps its own settings.
    config = PPODQNConfig(num_workers=1, seed=3, ppo=PPOConfig(lr=0.01, num_workers=5))
    assert (config.ppo.lr, config.ppo.num_workers, config.ppo.seed) == (0.01, 1, 3)
    assert config.ppo.env == "multi_cartpole"
    # replace moves them with the run; the learners' own settings stay.
    moved = config.replace(num_workers=2, dqn={"n_step": 3})
    assert (moved.ppo.num_workers, moved.dqn.num_workers) == (2, 2)
    assert (moved.ppo.lr, moved.dqn.n_step) == (0.01, 3)


def test_policies_come_from_the_learner_configs_and_the_field_stays_empty() -> None:
    config = PPODQNConfig(ppo={"lr": 0.01}, policies_to_train=[DQN_POLICY])
    assert config.policies == {}
    assert config.policy_ids() == [PPO_POLICY, DQN_POLICY]
    assert config.policy_specs()[PPO_POLICY].config is config.ppo
    assert config.policy_specs()[DQN_POLICY].config is config.dqn
    with pytest.raises(ConfigError, match=r"policies_to_train=\['x'\] must be a list of policy"):
        PPODQNConfig(policies_to_train=["x"])
    with pytest.raises(ConfigError, match=r"policy_mapping_fn=None must be given with more than"):
        PPODQNConfig(policy_mapping_fn=None)


def test_to_dict_gives_the_overrides_a_yaml_file_and_a_checkpoint_rebuild(tmp_path: Any) -> None:
    from rlflow.cli.output import write_yaml
    from rlflow.config.files import build_config, load_config_file
    from rlflow.trainer_state import restore_arguments

    config = PPODQNConfig(
        ppo={"lr": 0.01, "model": {"hidden": [8]}}, dqn={"training_intensity": 4.0}, seed=5
    )
    saved = config.to_dict()
    assert saved["ppo"] == {"lr": 0.01, "model": {"hidden": [8]}}
    assert saved["dqn"] == {"training_intensity": 4.0}
    assert PPODQNConfig.from_dict(saved) == config
    write_yaml(tmp_path / "config.yaml", saved)
    fields = load_config_file(tmp_path / "config.yaml").fields
    # YAML holds a function by its name only (any config's); the mapping is the default here.
    assert fields.pop("policy_mapping_fn") == "ppo_dqn_mapping"
    assert build_config(PPODQNConfig, fields) == config
    # A checkpoint's config with an override on top (the run's worker count) rebuilds it.
    kwargs = restore_arguments({"config": saved}, {"num_workers": 1})
    restored = PPODQNConfig.from_dict(kwargs)
    assert restored.ppo.num_workers == restored.dqn.num_workers == 1
    assert restored.ppo.lr == 0.01 and restored.dqn.training_intensity == 4.0


def test_yaml_values_of_a_learner_are_fitted_to_its_fields() -> None:
    from rlflow.config.files import build_config

    config = build_config(PPODQNConfig, {"ppo": {"lr": "1e-3"}, "dqn": {"training_intensity": 8}})
    assert config.ppo.lr == 0.001
    assert type(config.dqn.training_intensity) is float


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"ppo": {"clip_parm": 0.1}}, r"PPODQNConfig\.ppo: PPOConfig has no field 'clip_parm'"),
        ({"dqn": {"n_step": 0}}, r"PPODQNConfig\.dqn: DQNConfig\.n_step=0 must be an integer >= 1"),
        ({"dqn": {"num_workers": 3}}, r"dqn=.* sets \['num_workers'\]; set them on the run"),
        ({"ppo": [1]}, r"ppo=\[1\] must be a dict"),
        ({"dqn": PPOConfig()}, r"dqn=PPOConfig\(.* must be a dict of config overrides or a DQNC"),
        ({"ppo": PPOConfig(), "num_workers": -1}, r"PPODQNConfig\.ppo: PPOConfig\.num_workers=-1"),
        ({"train_weights": [1, 0]}, r"train_weights=\[1, 0\] must be None or \[ppo, dqn\]"),
        ({"policies": {"x": {}}}, r"policies=.* is built from the ppo and dqn fields"),
    ],
)
def test_bad_settings_name_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PPODQNConfig(**fields)


# ------------------------------------------------------------------------------ plan
def _plan(config: PPODQNConfig) -> tuple[WorkerSet, Any]:
    workers = WorkerSet(config, SPEC.policy_cls)
    return workers, SPEC.plan(workers, config)


def test_each_learner_trains_only_its_own_policy(local_backend: None) -> None:
    workers, plan = _plan(PPODQNConfig(**SMALL))
    try:
        local = workers.local_worker()
        assert isinstance(local.get_policy(PPO_POLICY), PPOPolicy)
        assert isinstance(local.get_policy(DQN_POLICY), DQNPolicy)
        results = plan.take(12)
    finally:
        workers.stop()
    last = results[-1]
    counters = last["counters"]
    trained_ppo = counters[f"{keys.NUM_TRAIN_STEPS}/{PPO_POLICY}"]
    trained_dqn = counters[f"{keys.NUM_TRAIN_STEPS}/{DQN_POLICY}"]
    # Every train step is one policy's: the two branches never train the other's policy.
    assert trained_ppo + trained_dqn == counters[keys.NUM_TRAIN_STEPS] == 12
    assert trained_ppo >= 1 and trained_dqn >= 1
    learner = last["info"]["learner"]
    assert "kl" in learner[PPO_POLICY] and "mean_td_error" in learner[DQN_POLICY]
    assert "kl" not in learner[DQN_POLICY]
    assert set(last["policy_reward_mean"]) == {PPO_POLICY, DQN_POLICY}
    assert last["num_agent_steps_sampled"] > last["num_env_steps_sampled"]


def test_train_weights_one_to_four_train_dqn_four_times_as_often(local_backend: None) -> None:
    # One PPO batch per sampling round; DQN replays 4 batches per PPO batch. In each pass of
    # the round robin PPO trains once, then DQN four times (its store turn ends early when it
    # is a round ahead of PPO: the fair duplicate holds it back, so no data piles up).
    ppo = {"train_batch_size": ROUND, "sgd_minibatch_size": ROUND, "num_sgd_iter": 1}
    workers, plan = _plan(PPODQNConfig(**{**SMALL, "ppo": ppo}, train_weights=[1, 4]))
    try:
        results = plan.take(10)  # two whole passes
    finally:
        workers.stop()
    steps = [
        (
            r["counters"].get(f"{keys.NUM_TRAIN_STEPS}/{PPO_POLICY}", 0),
            r["counters"].get(f"{keys.NUM_TRAIN_STEPS}/{DQN_POLICY}", 0),
        )
        for r in results
    ]
    assert steps == [(1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (2, 4), (2, 5), (2, 6), (2, 7), (2, 8)]


@pytest.mark.ray
def test_composed_plan_on_ray_syncs_both_policies_to_the_workers(ray_backend: None) -> None:
    config = PPODQNConfig(**{**SMALL, "num_workers": 2})
    workers, plan = _plan(config)
    try:
        results = plan.take(8)
        local = workers.local_worker().get_weights()
        remote = workers.foreach_worker(lambda w: w.get_weights())[1:]
    finally:
        workers.stop()
    counters = results[-1]["counters"]
    assert counters[f"{keys.NUM_TRAIN_STEPS}/{PPO_POLICY}"] >= 1
    assert counters[f"{keys.NUM_TRAIN_STEPS}/{DQN_POLICY}"] >= 1
    # Rounds of 2 workers x 2 envs x 8 steps.
    assert results[-1]["num_env_steps_sampled"] % 32 == 0
    # After the last train step both policies' weights reached every remote worker (the
    # set_weights calls run before the foreach call on each actor).
    for weights in remote:
        for pid in (PPO_POLICY, DQN_POLICY):
            for name, value in local[pid].items():
                np.testing.assert_array_equal(weights[pid][name], value)


def test_self_play_composes_with_the_mixed_plan(local_backend: None) -> None:
    # Tic-tac-toe, both learners by self-play in one run: each game seats one learner against
    # a snapshot of itself; each learner trains on its own games; its snapshots never train.
    pytest.importorskip("pettingzoo")
    from rlflow.config.self_play import snapshot_id

    config = PPODQNConfig(
        env="pettingzoo.classic.tictactoe_v3",
        num_envs_per_worker=8,
        min_time_s_per_iteration=0.0,
        ppo={"train_batch_size": 256, "sgd_minibatch_size": 64, "num_sgd_iter": 1},
        dqn={"learning_starts": 100, "train_batch_size": 32},
        self_play={"snapshot_every": 1, "pool_size": 1, "evaluation_interval": 0},
    )
    workers, plan = _plan(config)
    try:
        results = plan.take(6)
        local = workers.local_worker()
        weights = local.get_weights()
        local.sample()
        episodes = local.pop_episode_stats()
    finally:
        workers.stop()
    snapshots = {p: snapshot_id(p, 0) for p in (PPO_POLICY, DQN_POLICY)}
    self_play = results[-1]["self_play"]
    assert {p: r["snapshots"] for p, r in self_play.items()} == {p: 6 for p in snapshots}
    for record in self_play.values():  # each learner's games against its pool, every iteration
        pool = record["vs_pool"]
        assert pool["games"] > 0
        assert abs(pool["win_rate"] + pool["draw_rate"] + pool["loss_rate"] - 1.0) < 1e-9
    counters = results[-1]["counters"]
    assert all(counters[f"{keys.NUM_TRAIN_STEPS}/{p}"] >= 1 for p in snapshots)
    assert not any(f"{keys.NUM_TRAIN_STEPS}/{s}" in counters for s in snapshots.values())
    played = [sorted(a.policy_id for a in e.agent_returns) for e in episodes]
    assert {tuple(p) for p in played} == {(p, s) for p, s in snapshots.items()}
    # The newest snapshot is each learner as the last iteration left it.
    for learner, snap in snapshots.items():
        for name, value in weights[learner].items():
            np.testing.assert_array_equal(weights[snap][name], value)


# ------------------------------------------------------------------------------ learning
@pytest.mark.learning
def test_ppo_and_dqn_agents_each_reach_150_on_multi_cartpole(local_backend: None) -> None:
    outcome = train_to_target(
        "ppo_dqn", 150.0, budget=300_000, env="multi_cartpole", per_policy=True
    )
    print(f"\nppo_dqn on multi_cartpole (local): {outcome}")
    assert outcome.best >= 150.0, outcome
    assert outcome.steps <= 300_000


def test_tuned_config_maps_agent_0_to_ppo_and_agent_1_to_dqn() -> None:
    config = tuned_config("ppo_dqn", "multi_cartpole")
    assert isinstance(config, PPODQNConfig)
    assert config.env_config == {"num_agents": 2, "respawn": True}
    assert config.policy_mapping_fn is not None
    assert [config.policy_mapping_fn(a) for a in ("agent_0", "agent_1")] == [
        PPO_POLICY,
        DQN_POLICY,
    ]


# ------------------------------------------------------------------------- entry points
def test_cli_trains_ppo_dqn_until_every_policy_reaches_the_target(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlflow import flow
    from rlflow.cli import main

    flow.shutdown()
    try:
        code = main(
            ["train", "ppo_dqn", "--env", "multi_cartpole", "--backend", "local",
             "--stop-policy-reward", "25", "--stop-timesteps", "40000",
             "--out", str(tmp_path / "run")]
        )  # fmt: skip
    finally:
        flow.shutdown()
    out = capsys.readouterr().out
    assert code == 0, out
    # The progress line shows each policy; the run stops once the lower one reaches 25.
    assert "ppo_policy" in out and "dqn_policy" in out
    assert "done (policy_reward_mean=" in out, out


def test_evaluate_reports_each_policy(local_backend: None) -> None:
    from rlflow import Trainer

    config = {**SMALL, "env_config": {"num_agents": 2, "respawn": True, "horizon": 30}}
    with Trainer("ppo_dqn", config=config) as trainer:
        first = trainer.evaluate(num_episodes=2)
        assert first == trainer.evaluate(num_episodes=2)  # greedy, same seed
    assert first["episode_len_mean"] == 30.0  # respawning poles: the horizon ends episodes
    assert set(first["policy_reward_mean"]) == {PPO_POLICY, DQN_POLICY}
    # Every env step gives 1 to each pole standing: lives of both agents add up to the return.
    assert first["episode_return_mean"] <= 2 * 30


def test_two_trainer_example_plan_trains_both_policies(local_backend: None) -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "examples" / "two_trainer.py"
    spec = importlib.util.spec_from_file_location("two_trainer_example", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    workers, _ = _plan(PPODQNConfig(**SMALL))
    trained: dict[str, int] = {}
    try:
        plan = example.two_trainer_plan(workers, PPODQNConfig(**SMALL))
        for _, result in zip(range(200), plan, strict=False):
            counters = result["counters"]
            trained = {p: counters.get(f"{keys.NUM_TRAIN_STEPS}/{p}", 0) for p in SPEC_IDS}
            if min(trained.values()) >= 2:
                break
    finally:
        workers.stop()
    # Both learners ran; DQN (16 replays per stored transition) far more often than PPO.
    assert trained[PPO_POLICY] >= 2 and trained[DQN_POLICY] > trained[PPO_POLICY], trained

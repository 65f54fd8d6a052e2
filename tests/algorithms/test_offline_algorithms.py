"""bc and marwil: their plans over recorded experience, MARWIL's returns, the loss's weights, and
the errors of a run that names no recorded data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow import Trainer
from rlflow.algorithms import (
    BCConfig,
    CQLConfig,
    DQNConfig,
    MARWILConfig,
    SACConfig,
    get_algorithm,
)
from rlflow.algorithms.cql import CQLPolicy
from rlflow.algorithms.marwil import MARWILPolicy, MarwilReturns
from rlflow.data import SampleBatch
from rlflow.data.sample_batch import (
    ACTIONS,
    EPS_ID,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    VALUE_TARGETS,
)
from rlflow.errors import ConfigError
from rlflow.ops import experience
from rlflow.replay import DISCOUNTS
from rlflow.testing.envs import CountingEnv
from rlflow.workers import RolloutWorker, WorkerSet

pytestmark = pytest.mark.timeout(120)

TINY: dict[str, Any] = {
    "env": CountingEnv,
    "env_config": {"episode_len": 3},
    "model": {"hidden": (8,)},
}


def record(algo: str, root: Path, fragments: int, **fields: Any) -> str:
    """``fragments`` fragments of 10 steps sampled by ``algo``'s policy, written to ``root``."""
    spec = get_algorithm(algo)
    config = spec.config_cls(
        **fields, num_workers=0, rollout_fragment_length=10, output=str(root), seed=0
    )
    worker = RolloutWorker(config, spec.policy_cls, worker_index=1)
    for _ in range(fragments):
        worker.sample()
    worker.stop()
    return str(root)


@pytest.fixture(scope="module")
def counting_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """300 rows of CountingEnv sampled by PPO, written with ``output``."""
    return record("ppo", tmp_path_factory.mktemp("counting"), 30, **TINY)


@pytest.mark.parametrize("name", ["bc", "marwil"])
def test_offline_plans_train_on_recorded_rows_and_evaluate(
    local_backend: None, counting_data: str, name: str
) -> None:
    spec = get_algorithm(name)
    config = spec.config_cls(
        **TINY,
        input=counting_data,
        train_batch_size=40,
        sgd_minibatch_size=6,
        min_steps_per_iteration=100,
    )
    workers = WorkerSet(config, spec.policy_cls)
    try:
        plan = spec.plan(workers, config)
        graph = plan.describe().to_mermaid()
        assert "read_experience[1 files, shards=1]" in graph
        assert ("MarwilReturns" in graph) == (name == "marwil")
        first, second = plan.take(2)
        # Rows read count as sampled; each iteration reads at least min_steps_per_iteration.
        assert first["num_env_steps_sampled"] >= 100
        assert second["num_env_steps_trained"] == second["num_env_steps_sampled"] >= 200
        assert second["info"]["learner"]["default_policy"]["mean_weight"] > 0
        assert workers.local_worker().get_policy().update.num_grad_updates >= 5 * 7  # 7 minibatches
    finally:
        workers.stop()


def test_trainer_runs_bc_with_evaluation_as_its_only_env_use(counting_data: str) -> None:
    trainer = Trainer("bc", config={**TINY, "input": counting_data}, backend="local")
    try:
        result = trainer.train()
        assert result["num_env_steps_sampled"] >= 10_000  # the default iteration, in rows read
        assert result["evaluation/episode_return_mean"] == 3.0  # CountingEnv: 3 steps of 1
        assert result["episodes_total"] == 0  # nothing sampled
    finally:
        trainer.stop()


def test_offline_algorithms_name_what_is_missing(local_backend: None, tmp_path: Path) -> None:
    config = BCConfig(**TINY)  # input is the sampler by default
    workers = WorkerSet(config, get_algorithm("bc").policy_cls)
    try:
        with pytest.raises(ConfigError, match=r"BCConfig.input='sampler': this algorithm learns"):
            get_algorithm("bc").plan(workers, config)
    finally:
        workers.stop()
    with pytest.raises(ConfigError, match=r"BCConfig.beta=0.5 must be 0 for bc"):
        BCConfig(beta=0.5)
    with pytest.raises(ConfigError, match=r"MARWILConfig.observation_filter='MeanStdFilter'"):
        MARWILConfig(observation_filter="MeanStdFilter")
    with pytest.raises(ConfigError, match=r"MARWILConfig.input='.*nothing': no such folder"):
        MARWILConfig(input=str(tmp_path / "nothing"))


class _ValueIsFirstFeature:
    """A stand-in learner policy: V(obs) = obs[0]."""

    def value(self, obs: Any) -> Any:
        return np.asarray(obs)[:, 0].astype(np.float32)


class _Workers:
    def local_worker(self) -> Any:
        return self

    def get_policy(self, policy_id: str) -> Any:
        assert policy_id == "default_policy"
        return _ValueIsFirstFeature()


def test_marwil_returns_bootstrap_only_fragments_that_did_not_terminate() -> None:
    obs = np.array([[1.0], [2.0], [3.0], [4.0], [5.0]], np.float32)
    batch = SampleBatch(
        {
            OBS: obs,
            REWARDS: np.array([1.0, 1.0, 1.0, 2.0, 2.0], np.float32),
            TERMINATEDS: np.array([False, False, True, False, False]),
            EPS_ID: np.array([7, 7, 7, 8, 8]),
        }
    )
    gamma = 0.5
    out = MarwilReturns(_Workers(), gamma)(batch)  # type: ignore[arg-type]
    # Episode 7 terminated: G = 1 + .5 (1 + .5 * 1). Episode 8 was cut: bootstrap V(obs[-1]) = 5.
    expected = [1.75, 1.5, 1.0, 2 + 0.5 * (2 + 0.5 * 5), 2 + 0.5 * 5]
    np.testing.assert_allclose(out[VALUE_TARGETS], expected)
    assert out[VALUE_TARGETS].dtype == np.float32
    # With the next observation recorded, the bootstrap is V(next_obs) of the last row.
    with_next = SampleBatch({**batch, NEXT_OBS: obs + 10})
    out = MarwilReturns(_Workers(), gamma)(with_next)  # type: ignore[arg-type]
    np.testing.assert_allclose(out[VALUE_TARGETS][3:], [2 + 0.5 * (2 + 0.5 * 15), 2 + 0.5 * 15])


def _policy(**fields: Any) -> MARWILPolicy:
    config = MARWILConfig(model={"hidden": (8,)}, **fields)
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    return MARWILPolicy(space, gym.spaces.Discrete(2), config, seed=0)


def _tensors(policy: MARWILPolicy, returns: list[float]) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(0)
    n = len(returns)
    batch = {
        OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        ACTIONS: rng.integers(0, 2, n),
        VALUE_TARGETS: np.array(returns, np.float32),
    }
    return policy.update.batch_to_tensors(batch)


def test_bc_loss_is_the_negative_log_likelihood() -> None:
    policy = _policy(beta=0.0)
    tensors = _tensors(policy, [0.0] * 6)
    with torch.no_grad():
        loss, stats = policy.loss(tensors)
        dist_inputs, _ = policy.model_outputs(tensors)
        logp = policy.dist_class(dist_inputs).logp(tensors[ACTIONS])
    assert float(loss) == pytest.approx(float(-logp.mean()), rel=1e-6)
    assert float(stats["vf_loss"]) == 0.0 and float(stats["mean_weight"]) == 1.0


def test_marwil_weights_rows_by_exponentiated_advantages_clipped() -> None:
    policy = _policy(
        beta=2.0,
        moving_average_sqd_adv_norm_start=4.0,
        moving_average_sqd_adv_norm_update_rate=0.5,
        max_advantage_weight=5.0,
        vf_loss_coeff=0.0,
    )
    returns = [10.0, 0.0, -3.0, 0.5]
    tensors = _tensors(policy, returns)
    with torch.no_grad():
        dist_inputs, values = policy.model_outputs(tensors)
        logp = policy.dist_class(dist_inputs).logp(tensors[ACTIONS])
    advantages = tensors[VALUE_TARGETS] - values
    sqd = 4.0 + 0.5 * (float(advantages.pow(2).mean()) - 4.0)
    weights = torch.exp(2.0 * advantages / np.sqrt(sqd)).clamp(max=5.0)
    assert float(weights[0]) == 5.0  # the large advantage is clipped
    with torch.no_grad():
        loss, stats = policy.loss(tensors)
    assert float(loss) == pytest.approx(float(-(weights * logp).mean()), rel=1e-5)
    assert float(stats["sqd_adv_norm"]) == pytest.approx(sqd, rel=1e-6)
    state = policy.get_state()
    fresh = _policy(beta=2.0)
    fresh.set_state(state)
    assert float(fresh.sqd_adv_norm) == pytest.approx(sqd, rel=1e-6)


@pytest.fixture(scope="module")
def dqn_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """CountingEnv n-step transitions sampled by DQN (fragments of 10), written with ``output``."""
    return record("dqn", tmp_path_factory.mktemp("dqn"), 30, **TINY)


def test_dqn_fills_its_replay_from_recorded_transitions(
    local_backend: None, dqn_data: str, counting_data: str
) -> None:
    spec = get_algorithm("dqn")
    fields = {**TINY, "learning_starts": 50, "train_batch_size": 16, "min_time_s_per_iteration": 0}
    config = spec.config_cls(**fields, num_workers=0, input=dqn_data, min_steps_per_iteration=100)
    workers = WorkerSet(config, spec.policy_cls)
    try:
        plan = spec.plan(workers, config)
        assert "read_experience[1 files, shards=1]" in plan.describe().to_mermaid()
        result = next(plan)
        assert result["num_env_steps_sampled"] >= 100  # rows read
        assert result["num_env_steps_trained"] > 0
        assert result["episodes_total"] == 0  # the workers never sampled
    finally:
        workers.stop()
    # PPO's rows have no next_obs or discounts: refused, naming the file and the columns.
    ppo_rows = spec.config_cls(**fields, num_workers=0, input=counting_data)
    workers = WorkerSet(ppo_rows, spec.policy_cls)
    try:
        with pytest.raises(ConfigError, match=r"DQNConfig replay: .*has no column \['next_obs',"):
            spec.plan(workers, ppo_rows)
    finally:
        workers.stop()


def test_input_mix_takes_each_sources_batches_in_proportion(
    local_backend: None, dqn_data: str
) -> None:
    config = DQNConfig(
        **TINY,
        num_workers=2,
        rollout_fragment_length=4,
        input_mix={"sampler": 1, dqn_data: 2},
    )
    workers = WorkerSet(config, get_algorithm("dqn").policy_cls)
    try:
        items = experience(workers, config).take(9)
        # A sampling round: 2 workers x 4 steps; a recorded batch: a row group of 10-row
        # fragments (joined up to 256 rows).
        assert [b.count == 8 for b in items] == [True, False, False] * 3
        assert all(b.count % 10 == 0 for b in items if b.count != 8)
    finally:
        workers.stop()


def test_input_mix_is_checked_when_the_config_is_built(dqn_data: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"input_mix\['sampler'\]=0: the weight must be"):
        DQNConfig(input_mix={"sampler": 0, dqn_data: 1})
    with pytest.raises(ConfigError, match=r"input_mix\['/nowhere'\]='/nowhere': no such"):
        DQNConfig(input_mix={"sampler": 1, "/nowhere": 1})
    with pytest.raises(ConfigError, match=r"DQNConfig.input=.* must be 'sampler' when input_mix"):
        DQNConfig(input=dqn_data, input_mix={"sampler": 1})
    config = BCConfig(**TINY, input_mix={"sampler": 1, dqn_data: 1})
    workers = WorkerSet(config, get_algorithm("bc").policy_cls)
    try:
        with pytest.raises(ConfigError, match="an offline algorithm reads no 'sampler'"):
            get_algorithm("bc").plan(workers, config)
    finally:
        workers.stop()


CONTINUOUS: dict[str, Any] = {**TINY, "env_config": {"episode_len": 3, "continuous": True}}


@pytest.fixture(scope="module")
def sac_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Continuous CountingEnv transitions sampled by SAC, written with ``output``."""
    return record("sac", tmp_path_factory.mktemp("sac"), 20, **CONTINUOUS)


def test_cql_trains_conservatively_then_leaves_imitation(
    local_backend: None, sac_data: str
) -> None:
    spec = get_algorithm("cql")
    config = CQLConfig(
        **CONTINUOUS,
        input=sac_data,
        learning_starts=100,
        train_batch_size=16,
        training_intensity=16,  # one train step per recorded row
        bc_iters=30,
        min_steps_per_iteration=0,  # a result per train step
        min_time_s_per_iteration=0.0,
        evaluation_interval=0,
    )
    workers = WorkerSet(config, spec.policy_cls)
    policy = workers.local_worker().get_policy()
    try:
        phases = []
        for result in spec.plan(workers, config):
            stats = result["info"]["learner"]["default_policy"]
            phases.append((policy.update.num_grad_updates, stats["bc_phase"]))
            assert stats["cql_loss"] > 0
            if policy.update.num_grad_updates >= 40:
                break
        # The actor imitates for bc_iters updates, then is SAC's.
        assert all(phase == float(updates <= 30) for updates, phase in phases), phases
        # One train step per recorded row read (training_intensity over a batch's rows).
        read = result["num_env_steps_sampled"]
        assert read - 100 <= policy.update.num_grad_updates <= read
    finally:
        workers.stop()


def test_cql_without_its_term_is_sacs_loss() -> None:
    obs_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    act_space = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
    shared = {"model": {"hidden": (8,)}}
    rng = np.random.default_rng(0)
    batch = {
        OBS: rng.uniform(-1, 1, (12, 3)).astype(np.float32),
        NEXT_OBS: rng.uniform(-1, 1, (12, 3)).astype(np.float32),
        ACTIONS: rng.uniform(-2, 2, (12, 2)).astype(np.float32),
        REWARDS: rng.standard_normal(12).astype(np.float32),
        TERMINATEDS: np.zeros(12, bool),
        DISCOUNTS: np.full(12, 0.99, np.float32),
    }
    sac = get_algorithm("sac").policy_cls(obs_space, act_space, SACConfig(**shared), seed=4)
    cql = {**shared, "bc_iters": 0}  # SAC's actor from the start
    plain = CQLPolicy(obs_space, act_space, CQLConfig(**cql, min_q_weight=0.0), seed=4)
    conservative = CQLPolicy(obs_space, act_space, CQLConfig(**cql), seed=4)
    with torch.no_grad():
        sac_loss, _ = sac.loss(sac.update.batch_to_tensors(batch))
        plain_loss, plain_stats = plain.loss(plain.update.batch_to_tensors(batch))
        loss, stats = conservative.loss(conservative.update.batch_to_tensors(batch))
    assert float(plain_stats["cql_loss"]) == 0.0
    assert float(plain_loss) == pytest.approx(float(sac_loss), rel=1e-6)
    # The term is logsumexp over sampled actions minus Q at the data's: >= -log(3N) per critic.
    assert float(stats["cql_loss"]) > 0 and float(loss) > float(sac_loss)


def test_an_algorithm_that_reads_no_recorded_data_refuses_it(counting_data: str) -> None:
    with pytest.raises(ConfigError, match=r"ppo does not read recorded experience.*'bc', 'cql'"):
        Trainer("ppo", config={**TINY, "input": counting_data}, backend="local")

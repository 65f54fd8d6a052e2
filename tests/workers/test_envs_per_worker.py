"""``num_envs_per_worker="auto"`` (`rlflow.workers.envs_per_worker`, issue 48 part 1): the
rule on injected timings, the measurement it reads, and its resolution on the driver."""

from __future__ import annotations

from typing import Any

import pytest

from rlflow import Trainer
from rlflow.algorithms import DDPPOConfig, PPOConfig
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.errors import ConfigError
from rlflow.workers import RolloutWorker
from rlflow.workers.envs_per_worker import (
    CANDIDATES,
    RowCosts,
    measure_row_costs,
    pick_num_envs,
    resolve_num_envs_per_worker,
)

pytestmark = pytest.mark.timeout(180)

US = 1e-6


def costs(env_us: float, forward_us_per_call: dict[int, float]) -> dict[int, RowCosts]:
    """The env at ``env_us`` per row at every N; the forward's time per call at each N."""
    return {n: RowCosts(env_us * US, f * US / n) for n, f in forward_us_per_call.items()}


def test_the_rule_takes_the_smallest_n_whose_forward_is_a_quarter_of_the_env_step() -> None:
    # CartPole-like: a 5 us env step and a 100-130 us forward: no N reaches 25%, so the most.
    assert pick_num_envs(costs(5, {8: 100, 16: 105, 32: 115, 64: 130})) == 64
    # An Atari-like env (400 us a step): a 0.8 ms forward of 8 frames is 100 us a row (25%).
    assert pick_num_envs(costs(400, {8: 800, 16: 1200, 32: 2000, 64: 3500})) == 8
    # Just above at 8 (101 us a row), below at 16 (75 us).
    assert pick_num_envs(costs(400, {8: 808, 16: 1200, 32: 2000, 64: 3500})) == 16
    # A 40 us env: 25% is 10 us a row, first met at 32 (320 us a call).
    assert pick_num_envs(costs(40, {8: 300, 16: 310, 32: 320, 64: 400})) == 32
    # The candidates' order does not matter; the env's cost may vary with N.
    mixed = {
        64: RowCosts(10 * US, 1 * US),
        8: RowCosts(10 * US, 3 * US),
        16: RowCosts(4 * US, 1 * US),
    }
    assert pick_num_envs(mixed, (64, 16, 8)) == 16
    assert pick_num_envs(costs(1, {2: 10, 4: 10}), (2, 4), share=3.0) == 4  # 5 us, 2.5 us


def test_where_no_n_meets_the_share_the_least_cost_per_row_is_taken() -> None:
    # A CNN on Pong (measured here, loaded machine): its forward costs about the same per frame
    # at any N, and 64 games stepped slower per game than 8: more envs would not pay.
    pong = {
        8: RowCosts(452 * US, 242 * US),
        16: RowCosts(1267 * US, 469 * US),
        32: RowCosts(1569 * US, 434 * US),
        64: RowCosts(1808 * US, 731 * US),
    }
    assert pick_num_envs(pong) == 8
    tie = {8: RowCosts(4 * US, 2 * US), 16: RowCosts(3 * US, 3 * US)}
    assert pick_num_envs(tie, (8, 16)) == 8  # a tie goes to the fewer envs
    with pytest.raises(ValueError, match="no costs measured"):
        pick_num_envs({}, (8,))


def test_the_measurement_steps_the_configs_engine_with_the_policys_actions() -> None:
    worker = RolloutWorker(
        PPOConfig(env="CartPole-v1", num_envs_per_worker=1), PPOPolicy, worker_index=1
    )
    built: list[int] = []

    def make_venv(n: int) -> Any:
        from rlflow.envs.gym_vector import make_vector_env

        built.append(n)
        spec = worker.sampler_spec
        return make_vector_env(spec.creator, n, 0, vector_env=spec.vector_env)

    try:
        measured = measure_row_costs(make_venv, worker.get_policy(), (8, 64), seconds=0.2)
    finally:
        worker.stop()
    assert built == [8, 64] and sorted(measured) == [8, 64]
    assert all(c.env_s > 0 and c.forward_s > 0 for c in measured.values())
    # One batched forward is mostly a fixed cost: per row it falls as N grows.
    assert measured[64].forward_s < measured[8].forward_s / 2, measured


def test_auto_is_resolved_from_the_measurement_on_the_driver() -> None:
    config = PPOConfig(env="CartPole-v1", num_envs_per_worker="auto", num_workers=0)
    seen: dict[str, Any] = {}

    table = costs(40, {8: 300, 16: 310, 32: 320, 64: 400})
    asked: list[tuple[int, ...]] = []

    def measure(make_venv: Any, policy: Any, candidates: Any) -> dict[int, RowCosts]:
        venv = make_venv(3)  # the config's env and engine, at the size asked
        seen["obs"] = venv.reset().shape
        venv.close()
        asked.append(tuple(candidates))
        return {n: table[n] for n in candidates}

    resolved = resolve_num_envs_per_worker(config, PPOPolicy, measure=measure)
    assert resolved.num_envs_per_worker == 32 and resolved.envs_per_worker() == 32
    assert seen == {"obs": (3, 4)}
    assert asked == [(8,), (16,), (32,)]  # in increasing order, up to the first that meets it
    assert CANDIDATES == (8, 16, 32, 64)
    fixed = PPOConfig(env="CartPole-v1", num_envs_per_worker=4)
    assert resolve_num_envs_per_worker(fixed, PPOPolicy, measure=measure) is fixed


def test_a_trainer_resolves_auto_before_its_workers_start() -> None:
    with Trainer(
        "ppo",
        env="CartPole-v1",
        backend="local",
        num_workers=0,
        num_envs_per_worker="auto",
        rollout_fragment_length=16,
        train_batch_size=128,
        sgd_minibatch_size=64,
        num_sgd_iter=1,
    ) as trainer:
        chosen = trainer.config.num_envs_per_worker
        assert chosen in CANDIDATES
        assert trainer.workers.local_worker().sampler_spec.num_envs == chosen
        result = trainer.train()
        assert result["num_env_steps_sampled"] >= 128


def test_bad_values_are_config_errors_naming_the_field() -> None:
    for bad in ("fast", "8", 0, 2.5, True):
        with pytest.raises(ConfigError, match=r"PPOConfig.num_envs_per_worker="):
            PPOConfig(num_envs_per_worker=bad)
    assert PPOConfig(num_envs_per_worker="auto").num_envs_per_worker == "auto"
    with pytest.raises(ConfigError, match="num_envs_per_worker='auto' is resolved by a Trainer"):
        RolloutWorker(
            PPOConfig(env="CartPole-v1", num_envs_per_worker="auto"), PPOPolicy, worker_index=1
        )
    with pytest.raises(ConfigError, match=r"DDPPOConfig\.num_envs_per_worker='auto' must be a num"):
        DDPPOConfig(num_envs_per_worker="auto")

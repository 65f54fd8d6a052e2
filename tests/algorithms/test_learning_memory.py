"""Learning tier for policies with memory (issue 25) on `rlflow/StatelessCartPole-v1`: CartPole
observed without its velocities, so only a policy that remembers solves it.

PPO with the tuned LSTM config (`ppo/tuned/rlflow-StatelessCartPole-v1.yaml`) reaches a
100-episode mean of 300 within 300k env steps on both backends; the same settings without
memory stay below 150 in that budget, which is what shows the memory doing the work. IMPALA and
APPO with their tuned LSTM configs reach 150 within 500k on Ray (V-trace over the sequences, the
recurrent state stored with each row by the workers); R2D2 (sequences replayed from their stored
state, burn-in, n-step double-Q) reaches 150 within 300k on the local backend, and within 450k on
Ray through Ape-X's replay shards and learner thread (`apex_r2d2`).
"""

from __future__ import annotations

import pytest

from rlflow.testing.learning import train_to_target

pytestmark = pytest.mark.learning

ENV = "rlflow/StatelessCartPole-v1"
TARGET, BUDGET = 300.0, 300_000


@pytest.mark.timeout(900)
def test_ppo_with_an_lstm_reaches_300_on_the_local_backend(local_backend: None) -> None:
    outcome = train_to_target("ppo", TARGET, BUDGET, env=ENV, seed=0)
    assert outcome.best >= TARGET and outcome.steps <= BUDGET, outcome


@pytest.mark.ray
@pytest.mark.timeout(900)
def test_ppo_with_an_lstm_reaches_300_on_ray(ray_backend: None) -> None:
    outcome = train_to_target("ppo", TARGET, BUDGET, env=ENV, seed=0)
    assert outcome.best >= TARGET and outcome.steps <= BUDGET, outcome


@pytest.mark.timeout(600)
def test_the_same_ppo_without_memory_stays_below_150(local_backend: None) -> None:
    no_memory = {"model": {"use_lstm": False, "hidden": [64]}}
    outcome = train_to_target("ppo", 150.0, BUDGET, env=ENV, seed=0, overrides=no_memory)
    assert outcome.steps >= BUDGET and outcome.best < 150.0, outcome


@pytest.mark.ray
@pytest.mark.timeout(900)
@pytest.mark.parametrize("algo", ["impala", "appo"])
def test_impala_and_appo_with_an_lstm_reach_150_within_500k(ray_backend: None, algo: str) -> None:
    outcome = train_to_target(algo, 150.0, 500_000, env=ENV, seed=0)
    assert outcome.best >= 150.0 and outcome.steps <= 500_000, outcome
    assert outcome.trained > 0, outcome


@pytest.mark.timeout(900)
def test_r2d2_reaches_150_within_300k(local_backend: None) -> None:
    outcome = train_to_target("r2d2", 150.0, 300_000, env=ENV, seed=0)
    assert outcome.best >= 150.0 and outcome.steps <= 300_000, outcome


@pytest.mark.ray
@pytest.mark.timeout(900)
def test_apex_r2d2_reaches_150_within_450k_on_ray(ray_backend: None) -> None:
    # R2D2's sequences through Ape-X's replay shards (actors) and learner thread. Seed 0 on Ray
    # is not repeatable (asynchronous): 245,600 / 183,600 / 139,920 env steps to 150 in three
    # quiet runs (2026-11-28), and a fresh-clone CI run had 133 at 302,800; the budget is 1.8x
    # the most of the quiet runs.
    outcome = train_to_target("apex_r2d2", 150.0, 450_000, env=ENV, seed=0)
    assert outcome.best >= 150.0 and outcome.steps <= 450_000, outcome
    assert outcome.trained > outcome.steps, outcome  # training_intensity 8

"""Learning tier for games (issue 26): PPO learns PettingZoo's turn-based classic games by
self-play, measured against a uniformly random legal player.

Each test trains with the shipped tuned config (`ppo/tuned/pettingzoo.classic.<game>.yaml`:
the learner at a random seat against 20 frozen snapshots of itself) on the local backend, where
a seeded run takes the same steps however loaded the machine is, until the run's own periodic
measurement (`rlflow.ops.self_play.SnapshotPolicies`: 200 games, the learner greedy, its seat
taking turns) reaches the target or the budget is spent; then 400 more games on fresh seeds
confirm it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from rlflow import Trainer
from rlflow.algorithms import tuned_config
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.config.self_play import snapshot_id
from rlflow.ops.self_play import measure_learner

pytestmark = [pytest.mark.learning, pytest.mark.timeout(1200)]


def _train_until(
    env: str, budget: int, reached: Callable[[dict[str, Any]], bool]
) -> tuple[dict[str, Any], dict[str, Any], int, float]:
    """Train PPO self-play on ``env`` until a measurement ``reached`` the target or ``budget``
    env steps; the last measurement, a fresh one of 400 games, the steps and the seconds."""
    pytest.importorskip("pettingzoo")
    config = tuned_config("ppo", env, seed=0)
    start = time.perf_counter()
    with Trainer("ppo", config=config, backend="local") as trainer:
        measured: dict[str, Any] = {}
        while True:
            result = trainer.train()
            stats = result["self_play"][DEFAULT_POLICY_ID]
            if "vs_random" in stats:
                measured = stats["vs_random"]
                if reached(measured):
                    break
            if result["num_env_steps_sampled"] >= budget:
                break
        worker = trainer.workers.local_worker()  # a confirmation on other seeds
        newest = snapshot_id(DEFAULT_POLICY_ID, 0)
        confirm = measure_learner(worker, DEFAULT_POLICY_ID, newest, games=400, seed=77_000)
        steps = int(result["num_env_steps_sampled"])
    return measured, confirm["vs_random"], steps, time.perf_counter() - start


def _wins_or_draws(seat: dict[str, Any]) -> float:
    return float(seat["win_rate"] + seat["draw_rate"])


def test_ppo_self_play_wins_or_draws_95_percent_at_tictactoe_from_either_seat() -> None:
    def both_seats(rates: dict[str, Any]) -> bool:
        return all(_wins_or_draws(s) >= 0.95 for s in rates["seats"].values())

    measured, confirm, steps, seconds = _train_until(
        "pettingzoo.classic.tictactoe_v3", 500_000, both_seats
    )
    print(f"tictactoe: {steps} env steps, {seconds:.0f} s, measured {measured}, again {confirm}")
    assert both_seats(measured) and steps <= 500_000, (steps, measured)
    assert all(_wins_or_draws(s) >= 0.9 for s in confirm["seats"].values()), confirm


def test_ppo_self_play_beats_a_random_player_at_connect_four_90_percent() -> None:
    def wins(rates: dict[str, Any]) -> bool:
        return float(rates["win_rate"]) >= 0.9

    measured, confirm, steps, seconds = _train_until(
        "pettingzoo.classic.connect_four_v3", 300_000, wins
    )
    print(f"connect four: {steps} env steps, {seconds:.0f} s, measured {measured}, again {confirm}")
    assert wins(measured) and steps <= 300_000, (steps, measured)
    assert confirm["win_rate"] >= 0.85, confirm

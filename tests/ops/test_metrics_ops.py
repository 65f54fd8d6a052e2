"""Metric operators on the local backend: iteration filters and the metrics collector."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from rlflow import flow
from rlflow.algorithms import PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.errors import ConfigError
from rlflow.ops import (
    CollectMetrics,
    OncePerTimeInterval,
    OncePerTimestepsElapsed,
    keys,
    parallel_rollouts,
    standard_metrics_reporting,
)
from rlflow.ops.metrics import _IterationDone
from rlflow.testing.envs import CountingEnv
from rlflow.workers import WorkerSet

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def counting_config(**kw: Any) -> PGConfig:
    base: dict[str, Any] = {
        "env": CountingEnv,
        "env_config": {"episode_len": 3},
        "num_workers": 2,
        "num_envs_per_worker": 1,
        "rollout_fragment_length": 6,
        "model": {"hidden": (8,)},
    }
    base.update(kw)
    return PGConfig(**base)


def stepping(n: int, steps_per_item: int, counter: str = keys.NUM_ENV_STEPS_SAMPLED) -> Any:
    """Items 0..n-1; each adds ``steps_per_item`` to ``counter`` when it passes."""

    def count(i: int) -> int:
        flow.current_metrics().counters[counter] += steps_per_item
        return i

    return flow.from_iterable(range(n)).for_each(count)


def fake_clock(times: list[float]) -> Any:
    ticks: Iterator[float] = iter(times)
    return lambda: next(ticks)


def test_once_per_time_interval() -> None:
    f = OncePerTimeInterval(1.0, clock=fake_clock([10.0, 10.9, 11.0, 11.5, 12.1, 12.2]))
    assert [f(None) for _ in range(6)] == [False, False, True, False, True, False]
    assert all(OncePerTimeInterval(0)(None) for _ in range(3))
    for bad in (-1, "1", True):
        with pytest.raises(ConfigError, match="seconds"):
            OncePerTimeInterval(bad)  # type: ignore[arg-type]


def test_once_per_timesteps_elapsed_passes_exact_items() -> None:
    passed = stepping(10, 3).filter(OncePerTimestepsElapsed(7)).take(10)
    # counter after item i is 3(i+1): 9 (>=7), 18 (>=16), 27 (>=25)
    assert passed == [2, 5, 8]


def test_once_per_timesteps_elapsed_by_steps_trained() -> None:
    trained = stepping(6, 5, keys.NUM_ENV_STEPS_TRAINED)
    assert trained.filter(OncePerTimestepsElapsed(10, by_steps_trained=True)).take(6) == [1, 3, 5]
    untouched = stepping(6, 5, keys.NUM_ENV_STEPS_TRAINED)
    assert untouched.filter(OncePerTimestepsElapsed(10)).take(6) == []
    with pytest.raises(ConfigError, match="steps=-1"):
        OncePerTimestepsElapsed(-1)


def test_iteration_boundary_resets_both_rules_together() -> None:
    # The time rule fails at the first step boundary; steps keep counting, not restarting.
    done = _IterationDone(10, 1.0, clock=fake_clock([0.0, 0.5, 0.8, 1.2, 1.3, 2.4]))
    passed = stepping(6, 5).filter(done).take(6)
    # steps 5,10,15,20,25,30 at t 0,.5,.8,1.2,1.3,2.4 -> item 3 (20 steps, 1.2 s); then
    # item 5 (30 - 20 = 10 steps, 2.4 - 1.2 = 1.2 s)
    assert passed == [3, 5]


def test_collect_metrics_before_any_episode_has_no_nan() -> None:
    workers = WorkerSet(counting_config(), PGPolicy)
    result = flow.from_iterable([0]).for_each(CollectMetrics(workers)).take(1)[0]
    assert result["episode_return_mean"] is None
    assert result["episodes_this_iter"] == 0 and result["episodes_total"] == 0
    numbers = [v for v in result.values() if isinstance(v, float)]
    assert not any(math.isnan(v) for v in numbers)


def test_collect_metrics_counts_episodes_and_steps() -> None:
    workers = WorkerSet(counting_config(), PGPolicy)
    collect = CollectMetrics(workers, smoothing_episodes=3)
    plan = parallel_rollouts(workers).for_each(collect)
    first, second = plan.take(2)
    # Each round: 2 workers x 6 steps = 12 steps = 4 episodes of length 3.
    assert first["episodes_this_iter"] == 4 and first["episodes_total"] == 4
    assert second["episodes_this_iter"] == 4 and second["episodes_total"] == 8
    assert second["episode_return_mean"] == 3.0 and second["episode_len_mean"] == 3.0
    assert (second["episode_return_min"], second["episode_return_max"]) == (3.0, 3.0)
    assert second["num_env_steps_sampled"] == 24
    assert second["num_env_steps_sampled_this_iter"] == 12
    assert second["num_env_steps_trained"] == 0
    assert second["num_healthy_workers"] == 2
    assert plan.metrics.counters[keys.NUM_EPISODES] == 8
    assert set(second) >= {"info", "timers", "counters"}
    with pytest.raises(ConfigError, match="smoothing_episodes"):
        CollectMetrics(workers, smoothing_episodes=0)


def test_standard_metrics_reporting_defines_iterations_by_steps() -> None:
    workers = WorkerSet(counting_config(), PGPolicy)
    config = counting_config(min_steps_per_iteration=30)
    results = standard_metrics_reporting(parallel_rollouts(workers), workers, config).take(2)
    # 12 steps per round: an iteration ends at 36, the next at 72.
    assert [r["num_env_steps_sampled"] for r in results] == [36, 72]
    assert [r["episodes_this_iter"] for r in results] == [12, 12]
    assert results[1]["timers"] == {}


def test_standard_metrics_reporting_reports_every_item_by_default() -> None:
    workers = WorkerSet(counting_config(), PGPolicy)
    plan = standard_metrics_reporting(parallel_rollouts(workers), workers, counting_config())
    assert [r["num_env_steps_sampled"] for r in plan.take(3)] == [12, 24, 36]


def test_collect_metrics_adds_each_teams_return() -> None:
    # two_team_grid: a team's agents share its reward, the other team gets its opposite; a
    # team's return is the sum over its agents, and the two teams' sum to 0 in every episode.
    config = PGConfig(env="two_team_grid", num_workers=0, rollout_fragment_length=40, seed=0)
    workers = WorkerSet(config, PGPolicy)
    teams = {"red": ["red_0", "red_1"], "blue": ["blue_0", "blue_1"]}
    collect = CollectMetrics(workers, smoothing_episodes=1000, teams=teams)
    result = parallel_rollouts(workers).for_each(collect).take(3)[-1]
    assert result["episodes_total"] > 0
    red, blue = result["team_return_mean"]["red"], result["team_return_mean"]["blue"]
    assert red == pytest.approx(-blue) and result["team_return_mean/red"] == red
    # Per episode a team of two scores +1, 0 or -1 each: +2, 0 or -2 together.
    extremes = {result[f"team_return_{s}"][team] for s in ("min", "max") for team in teams}
    assert extremes <= {-2.0, 0.0, 2.0}
    assert result["episode_return_mean"] == pytest.approx(red + blue, abs=1e-9)
    plain = flow.from_iterable([0]).for_each(CollectMetrics(workers)).take(1)[0]
    assert "team_return_mean" not in plain  # no teams: no key

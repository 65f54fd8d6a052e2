"""Trainer: results, checkpoint determinism, evaluate, plan override, early errors."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rlflow
from rlflow import flow
from rlflow import trainer as trainer_mod
from rlflow.algorithms import ALGORITHMS
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.config import AlgorithmConfig
from rlflow.errors import ConfigError, PlanError
from rlflow.trainer import CHECKPOINT_META, RESULT_KEYS, Trainer

pytestmark = pytest.mark.timeout(60)

NUMERIC_FIELDS = (
    "episode_return_mean",
    "episode_len_mean",
    "episodes_total",
    "num_env_steps_sampled",
    "num_env_steps_trained",
    "iteration",
)
TINY = {"rollout_fragment_length": 16, "num_envs_per_worker": 2, "train_batch_size": 32}


# --------------------------------------------------------------------- a test-local algorithm
@dataclass(frozen=True, kw_only=True)
class FakeConfig(AlgorithmConfig):
    """A config with one extra field, to test the validation path."""

    fake_coeff: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_range("fake_coeff", 0.0, 10.0)


@dataclass(frozen=True)
class FakeSpec:
    name: str
    config_cls: type[AlgorithmConfig]
    policy_cls: type
    plan: Any
    summary: str


def fake_plan(workers: Any, config: FakeConfig) -> flow.LocalIterator[dict[str, Any]]:
    """Synchronous sampling from every worker, one learner step, weight sync, a report."""
    local, remotes = workers.local_worker(), workers.remote_workers()
    if remotes:
        rollouts: flow.LocalIterator[Any] = flow.from_actors(remotes).gather_sync()
    else:
        rollouts = flow.from_iterable(iter(int, 1)).for_each(lambda _: local.sample())

    def train(batch: Any) -> dict[str, Any]:
        ctx = flow.current_metrics()
        ctx.counters["num_env_steps_sampled"] += batch.count
        stats = local.learn_on_batch(batch)
        ctx.counters["num_env_steps_trained"] += batch.count
        workers.sync_weights()
        return stats

    def report(stats: dict[str, Any]) -> dict[str, Any]:
        ctx = flow.current_metrics()
        episodes = list(local.pop_episode_stats())
        for stats_list in flow.get([w.pop_episode_stats.remote() for w in remotes]):
            episodes.extend(stats_list)
        history = ctx.info.setdefault("history", [])
        history.extend((float(e.return_), int(e.length)) for e in episodes)
        del history[: -config.metrics_num_episodes_for_smoothing]
        ctx.counters["num_episodes"] += len(episodes)
        return {
            "episode_return_mean": float(np.mean([h[0] for h in history])) if history else math.nan,
            "episode_len_mean": float(np.mean([h[1] for h in history])) if history else math.nan,
            "episodes_total": ctx.counters["num_episodes"],
            "num_env_steps_sampled": ctx.counters["num_env_steps_sampled"],
            "num_env_steps_trained": ctx.counters["num_env_steps_trained"],
            "info": {"learner": stats},
        }

    return rollouts.for_each(train).for_each(report)


FAKE = FakeSpec("fake", FakeConfig, PGPolicy, fake_plan, "A test-local algorithm.")


@pytest.fixture(autouse=True)
def fake_algo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Register FAKE next to the real algorithms for one test."""
    monkeypatch.setitem(ALGORITHMS, "fake", FAKE)
    flow.shutdown()
    yield
    flow.shutdown()


@pytest.fixture
def idle() -> bool:
    """``flow.is_initialized()`` with no backend chosen (True if another module left Ray up)."""
    flow.shutdown()
    return flow.is_initialized()


def make(**kwargs: Any) -> Trainer:
    fields = {"env": "CartPole-v1", "num_workers": 2, "seed": 3, "backend": "local", **TINY}
    fields.update(kwargs)
    return Trainer("fake", **fields)


# ----------------------------------------------------------------------------- the tests
def test_lazy_export_and_result_keys(idle: bool) -> None:
    assert rlflow.Trainer is Trainer
    with make() as trainer:
        assert flow.backend_name() == "local"
        first, second = trainer.train(), trainer.train()
        assert set(RESULT_KEYS) <= set(second)
        assert (first["iteration"], second["iteration"]) == (1, 2)
        assert second["num_env_steps_sampled"] == 2 * first["num_env_steps_sampled"] == 64
        assert second["time_total_s"] >= second["time_this_iter_s"] > 0
        assert second["env_steps_per_s"] > 0
        assert trainer.metrics.counters["num_env_steps_sampled"] == 64
        assert isinstance(trainer.config, FakeConfig) and trainer.config.seed == 3
        assert len(trainer.workers.remote_workers()) == 2
        assert "flowchart" in trainer.plan_graph().to_mermaid()
    assert flow.is_initialized() == idle  # the trainer started the backend, so it shut it down
    trainer.stop()  # idempotent
    with pytest.raises(rlflow.errors.RLFlowError, match="stopped"):
        trainer.train()


def test_checkpoint_restore_continues_identically(tmp_path: Path) -> None:
    with make() as trainer:
        trainer.train()
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        results_a = [trainer.train(), trainer.train()]
    meta = json.loads((Path(path) / CHECKPOINT_META).read_text())
    assert meta["algorithm"] == "fake" and meta["iteration"] == 2
    with Trainer.restore(path, backend="local") as restored:
        assert restored.iteration == 2 and restored.config == trainer.config
        results_b = [restored.train(), restored.train()]
    for a, b in zip(results_a, results_b, strict=True):
        assert {k: a[k] for k in NUMERIC_FIELDS} == {k: b[k] for k in NUMERIC_FIELDS}
        assert a["info"] == b["info"]  # learner stats: same weights, same batches
        assert b["time_total_s"] > meta["time_total_s"]


def test_restore_overrides_and_worker_count_change(tmp_path: Path) -> None:
    with make() as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        weights = trainer.workers.local_worker().get_weights()
    with Trainer.restore(path, backend="local", num_workers=1) as restored:
        assert restored.config.num_workers == 1
        got = restored.workers.local_worker().get_weights()
        assert all(
            np.array_equal(got["default_policy"][k], v)
            for k, v in weights["default_policy"].items()
        )
        assert restored.train()["iteration"] == 2


def test_evaluate_is_greedy_and_leaves_training_alone() -> None:
    with make(num_workers=0) as trainer:
        trainer.train()
        before = trainer.workers.local_worker().get_state()
        first = trainer.evaluate(num_episodes=3)
        again = trainer.evaluate(num_episodes=3)
        assert first == again  # greedy actions, same evaluation seed
        assert first["episodes"] == 3
        assert (
            first["episode_return_min"]
            <= first["episode_return_mean"]
            <= first["episode_return_max"]
        )
        after = trainer.workers.local_worker().get_state()
        assert np.array_equal(
            before["policies"]["default_policy"]["generator"],
            after["policies"]["default_policy"]["generator"],
        )
        with pytest.raises(ConfigError, match="num_episodes"):
            trainer.evaluate(num_episodes=0)


def test_multi_agent_evaluate_runs_the_workers_sampler() -> None:
    multi = {
        "env": "multi_cartpole",
        "env_config": {"num_agents": 2},
        "policies": {"p0": {}, "p1": {}},
        "policy_mapping_fn": lambda agent: "p" + agent[-1],
    }
    with make(num_workers=0, **multi) as trainer:
        local = trainer.workers.local_worker()
        greedy = trainer.evaluate(num_episodes=2, seed=5)
        assert greedy == trainer.evaluate(num_episodes=2, seed=5)
        episodes = local.evaluate(2, seed=5)  # the same loop, on the worker
        assert greedy["episode_return_mean"] == np.mean([e.return_ for e in episodes])
        assert {r.policy_id for e in episodes for r in e.agent_returns} == {"p0", "p1"}
        assert greedy["policy_reward_mean/p0"] == np.mean(
            [r.return_ for e in episodes for r in e.agent_returns if r.policy_id == "p0"]
        )
        stochastic = trainer.evaluate(num_episodes=2, seed=5, explore=True)
        assert stochastic["episodes"] == 2 and "policy_reward_max/p1" in stochastic


def test_user_plan_override() -> None:
    calls = []

    def my_plan(workers: Any, config: Any) -> flow.LocalIterator[dict[str, Any]]:
        calls.append(config.num_workers)

        def step(i: int) -> dict[str, Any]:
            flow.current_metrics().counters["num_env_steps_sampled"] += 10
            return {"custom": i}

        return flow.from_iterable(iter(range(100))).for_each(step)

    with make(plan=my_plan) as trainer:
        result = trainer.train()
        assert calls == [2]  # the plan is built once
        assert result["custom"] == 0 and result["num_env_steps_sampled"] == 10
        assert result["episode_return_mean"] is None and result["episodes_total"] == 0
        assert trainer.train()["custom"] == 1
        assert "for_each(step)" in trainer.plan_graph().to_mermaid()


def test_bad_plans_are_reported(idle: bool) -> None:
    with pytest.raises(PlanError, match="LocalIterator"):
        make(plan=lambda workers, config: [1, 2])
    assert flow.is_initialized() == idle  # released after the failed build
    with make(plan=lambda w, c: flow.from_iterable([{"a": 1}])) as trainer:
        trainer.train()
        with pytest.raises(PlanError, match="ended"):
            trainer.train()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"algo": "fakr"}, "'fake'"),
        ({"env": "CartPole-v9"}, "CartPole-v1"),
        ({"trian_batch_size": 10}, "train_batch_size"),
        ({"lr": "fast"}, r"FakeConfig.lr='fast'"),
        ({"fake_coeff": 11.0}, r"fake_coeff=11.0 must be a number in \[0.0, 10.0\]"),
        ({"num_workers": -1}, "num_workers=-1"),
        ({"backend": "spark"}, "backend"),
        ({"address": "ray://x:1"}, "address"),
    ],
)
def test_bad_input_fails_before_any_actor_starts(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], match: str, idle: bool
) -> None:
    def no_workers(*args: Any) -> None:
        raise AssertionError("workers were started")

    monkeypatch.setattr(trainer_mod, "_make_workers", no_workers)
    algo = kwargs.pop("algo", "fake")
    fields = {"env": "CartPole-v1", "backend": "local", **kwargs}
    with pytest.raises(ConfigError, match=match):
        Trainer(algo, **fields)
    assert flow.is_initialized() == idle


def test_shared_backend_is_released_by_the_last_trainer(idle: bool) -> None:
    first = make(num_workers=0)
    second = make(num_workers=0)
    first.stop()
    assert flow.backend_name() == "local"  # still used by `second`
    second.train()
    second.stop()
    assert flow.is_initialized() == idle


def test_user_started_backend_is_left_running() -> None:
    flow.init(backend="local")
    with make(num_workers=0) as trainer:
        trainer.train()
    assert flow.backend_name() == "local"


def test_not_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not an rlflow checkpoint"):
        Trainer.restore(tmp_path)


# CollectMetrics (ops/metrics.py) keeps its episode window and "this iteration" baselines in
# the operator, not in the plan's context, so they restart empty after a restore.
OP_LOCAL_FIELDS = {
    "episode_return_mean",
    "episode_return_min",
    "episode_return_max",
    "episode_len_mean",
    "num_env_steps_sampled_this_iter",
    "num_env_steps_trained_this_iter",
}
NOT_TRAINING = {"timers", "stages", "time_this_iter_s", "time_total_s", "env_steps_per_s"}


def _restore_run(algo: str, tmp_path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    fields: dict[str, Any] = {"env": "CartPole-v1", "num_workers": 2, "seed": 1, **TINY}
    if algo == "ppo":
        fields.update(sgd_minibatch_size=16, num_sgd_iter=2)
    if algo in ("sac", "td3"):  # Box actions; train from the first round on
        fields.update(env="Pendulum-v1", env_config={"max_episode_steps": 16})
        fields.update(learning_starts=32, model={"hidden": (16,)}, checkpoint_replay_buffers=True)
        # Iterations end by steps alone: with a time floor their lengths would follow the
        # clock, and the restored run must repeat the original's.
        fields.update(min_time_s_per_iteration=0.0)
    with Trainer(algo, backend="local", **fields) as trainer:
        trainer.train()
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        results_a = [trainer.train(), trainer.train()]
    with Trainer.restore(path, backend="local") as restored:
        results_b = [restored.train(), restored.train()]
    return results_a, results_b


@pytest.mark.parametrize("algo", ["pg", "ppo", "sac", "td3"])
def test_real_algorithm_restore_continues_identically(algo: str, tmp_path: Path) -> None:
    results_a, results_b = _restore_run(algo, tmp_path)
    for a, b in zip(results_a, results_b, strict=True):
        assert set(RESULT_KEYS) <= set(a) and a["episodes_total"] > 0
        skip = NOT_TRAINING | OP_LOCAL_FIELDS
        diff = {k: (a[k], b[k]) for k in a if k not in skip and a[k] != b[k]}
        assert not diff, sorted(diff)  # counters, learner stats, episodes_total, ...
        # Stage keys by position in the plan (a restore in this process builds its plan after
        # others), their counts restored with the checkpoint: as the uninterrupted run's.
        items = {key: stats["items"] for key, stats in a["stages"].items()}
        assert {key: stats["items"] for key, stats in b["stages"].items()} == items
        assert items and all(n > 0 for n in items.values())


def test_real_algorithm_restore_keeps_episode_window(tmp_path: Path) -> None:
    results_a, results_b = _restore_run("pg", tmp_path)
    for a, b in zip(results_a, results_b, strict=True):
        assert {k: a[k] for k in OP_LOCAL_FIELDS} == {k: b[k] for k in OP_LOCAL_FIELDS}


@pytest.mark.ray
@pytest.mark.timeout(240)  # two worker sets start on Ray: tens of seconds on a loaded machine
def test_ray_backend(ray_session: None, tmp_path: Path) -> None:
    flow.init(backend="ray")
    with make(backend="ray", num_workers=1) as trainer:
        result = trainer.train()
        assert result["num_env_steps_sampled"] == 32 and result["episodes_total"] >= 0
        path = trainer.save(tmp_path / "ckpt")
    with Trainer.restore(path) as restored:
        assert restored.train()["num_env_steps_sampled"] == 64
    assert flow.backend_name() == "ray"  # started by the fixture, left running


def test_stop_ends_the_plans_learner_thread() -> None:
    import threading

    def learners() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "rlflow-learner" and t.is_alive()]

    before = len(learners())
    trainer = Trainer(
        "impala",
        env="CartPole-v1",
        num_workers=1,
        backend="local",
        rollout_fragment_length=10,
        train_batch_size=20,
        model={"hidden": (8,)},
    )
    trainer.train()
    assert len(learners()) == before + 1
    trainer.stop()
    assert len(learners()) == before

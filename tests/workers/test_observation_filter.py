"""Observation filters (``observation_filter="MeanStdFilter"``): the merge math against numpy,
clipping, the filtered rows of both samplers, the learner's sync on both backends, every plan,
evaluation, checkpoints, export, config errors, and a learning test on a badly scaled env."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from gymnasium import spaces

from rlflow import Trainer, flow
from rlflow.algorithms import ALGORITHMS, DQNConfig, PGConfig, get_algorithm, tuned_config
from rlflow.algorithms.dqn import DQNPolicy
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.config import DEFAULT_POLICY_ID, PolicySpec
from rlflow.data import NEXT_OBS, OBS, TERMINATEDS, TRUNCATEDS, MultiAgentBatch
from rlflow.envs import POINT_NAV_ID, config_env_creator
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentEnv, MultiAgentStep
from rlflow.errors import ConfigError, ConfigTypeError
from rlflow.export import load_policy
from rlflow.export.files import SPEC_FILE
from rlflow.filters import (
    CLIP,
    EPSILON,
    MeanStdFilter,
    RunningStat,
    filter_from_json,
    filter_to_json,
    make_filter,
)
from rlflow.ops import SyncObservationFilters
from rlflow.testing.envs import CountingEnv
from rlflow.workers import RolloutWorker, WorkerSet

pytestmark = pytest.mark.timeout(120)

Array = npt.NDArray[Any]
PID = DEFAULT_POLICY_ID
MSF = {"observation_filter": "MeanStdFilter"}
SCALED_CARTPOLE = [{"name": "rlflow.testing.envs.ScaleObservation", "kwargs": {"scale": 1000}}]


def reference(
    episode_len: int,
    steps: int,
    *,
    num_envs: int = 1,
    offset: float = 0.0,
    scale: float = 1.0,
    one_batch_at_ends: bool = True,
) -> tuple[Array, Array, Array]:
    """What a MeanStdFilter makes of a counting env's observations (``offset + scale * k`` at
    step k of an episode of ``episode_len`` steps; ``num_envs`` copies in lockstep), computed
    from scratch with numpy: the filtered observations acted on, the filtered next observations,
    and every raw value the filter saw (a reset's, then each step's: the terminal one of an
    episode that ended with the next episode's first, in one batch, or in two batches without
    ``one_batch_at_ends``, as the multi-agent sampler filters them)."""
    seen: list[float] = []

    def push(*values: float) -> list[np.float32]:
        for value in values:
            seen.extend([value] * num_envs)
        a = np.array(seen, dtype=np.float64)
        std = a.std(ddof=1) if a.size > 1 else 1.0
        return [np.float32(np.clip((v - a.mean()) / (std + EPSILON), -CLIP, CLIP)) for v in values]

    obs, next_obs = [], []
    (current,), k = push(offset), 0
    for _ in range(steps):
        obs.append(current)
        k += 1
        if k == episode_len and one_batch_at_ends:
            last, current = push(offset + scale * k, offset)
            next_obs.append(last)
            k = 0
        elif k == episode_len:
            next_obs.extend(push(offset + scale * k))
            (current,), k = push(offset), 0
        else:
            (current,) = push(offset + scale * k)
            next_obs.append(current)
    return np.array(obs), np.array(next_obs), np.array(seen)


def assert_stats(stat: RunningStat, data: Array) -> None:
    """``stat`` holds exactly the samples ``data`` (rows), up to float64 rounding."""
    assert stat.n == len(data)
    np.testing.assert_allclose(stat.mean, data.mean(axis=0), rtol=1e-12, atol=1e-12)
    if len(data) > 1:
        np.testing.assert_allclose(stat.var, data.var(axis=0, ddof=1), rtol=1e-10)


# ------------------------------------------------------------------------ the math
def test_running_stat_matches_numpy_batch_by_batch() -> None:
    rng = np.random.default_rng(0)
    stat = RunningStat((2, 3))
    rows = []
    for size in (1, 5, 1, 64, 7):
        batch = rng.normal(1000.0, 0.01, size=(size, 2, 3))  # a large offset, a tiny spread
        stat.push(batch)
        rows.append(batch)
        assert_stats(stat, np.concatenate(rows))
    assert stat.std.shape == (2, 3)
    np.testing.assert_allclose(stat.std, np.concatenate(rows).std(axis=0, ddof=1), rtol=1e-9)


def test_fewer_than_two_samples_only_centre() -> None:
    stat = RunningStat((2,))
    assert stat.std.tolist() == [1.0, 1.0]
    stat.push(np.array([[3.0, -4.0]]))
    assert stat.std.tolist() == [1.0, 1.0] and stat.mean.tolist() == [3.0, -4.0]
    f = MeanStdFilter((2,))
    assert f(np.array([[3.0, -4.0]])).tolist() == [[0.0, 0.0]]


def test_merging_two_workers_deltas_gives_the_statistics_of_all_data() -> None:
    rng = np.random.default_rng(1)
    learner, w1, w2 = MeanStdFilter((3,)), MeanStdFilter((3,)), MeanStdFilter((3,))
    data1 = [rng.normal([5.0, -200.0, 0.0], [1.0, 30.0, 1e-3], size=(n, 3)) for n in (4, 9)]
    data2 = [rng.normal([-5.0, 100.0, 1.0], [2.0, 10.0, 1e-3], size=(n, 3)) for n in (1, 20, 3)]
    for batch in data1:
        w1(batch)
    for batch in data2:
        w2(batch)
    for worker in (w1, w2):  # what the learner gets from get_filters(flush_after=True)
        learner.apply_changes(worker.copy())
        worker.take_delta()
    assert_stats(learner.running, np.concatenate([*data1, *data2]))
    # Worker 1 sees more before the merged filter reaches it: it keeps them on top.
    late = rng.normal(0.0, 1.0, size=(6, 3))
    w1(late)
    w1.sync(learner)
    w2.sync(learner)
    assert_stats(w1.running, np.concatenate([*data1, *data2, late]))
    assert w1.delta.n == 6  # counted at the next sync, once
    assert w2.running.n == learner.running.n
    assert np.array_equal(w2.running.mean, learner.running.mean)
    learner.apply_changes(w1)
    assert_stats(learner.running, np.concatenate([*data1, *data2, late]))


def test_normalization_formula_and_clipping() -> None:
    rng = np.random.default_rng(2)
    f = MeanStdFilter((2,))
    data = rng.normal([10.0, -3.0], [2.0, 0.5], size=(100, 2))
    out = f(data)
    assert out.dtype == np.float32
    mean, std = data.mean(axis=0), data.std(axis=0, ddof=1)
    np.testing.assert_allclose(out, (data - mean) / (std + 1e-8), rtol=1e-5, atol=1e-5)
    far = f(np.array([[1e6, -1e6], [10.0, -3.0]]), update=False)
    assert far[0].tolist() == [CLIP, -CLIP] == [10.0, -10.0]
    assert np.all(np.abs(far[1]) < 1.0)


def test_frozen_filters_never_learn() -> None:
    f = MeanStdFilter((1,))
    f(np.array([[1.0], [2.0], [3.0]]))
    frozen = f.frozen_copy()
    before = f.get_state()
    f(np.array([[100.0]]), update=False)
    frozen(np.array([[100.0]]))
    assert f.running.n == frozen.running.n == 3 and f.get_state()["running"]["n"] == 3
    np.testing.assert_array_equal(f.get_state()["running"]["mean"], before["running"]["mean"])


def test_state_round_trip_in_place() -> None:
    f = MeanStdFilter((2,))
    f(np.arange(10.0).reshape(5, 2))
    g = MeanStdFilter((2,))
    g.set_state(f.get_state())
    x = np.array([[1.0, 7.0]])
    assert np.array_equal(g(x, update=False), f(x, update=False))
    assert g.delta.n == f.delta.n == 5


# ------------------------------------------------------------------------ config errors
@pytest.mark.parametrize("value", ["MeanStd", "meanstdfilter", "ConcurrentMeanStdFilter", ""])
def test_an_unknown_filter_is_a_config_error_naming_key_and_values(value: str) -> None:
    with pytest.raises(ConfigError, match=r"PGConfig\.observation_filter=") as info:
        PGConfig(observation_filter=value)
    assert "'NoFilter', 'MeanStdFilter'" in str(info.value)


def test_a_filter_that_is_not_a_string_is_a_type_error() -> None:
    with pytest.raises(ConfigTypeError, match=r"observation_filter=True"):
        PGConfig(observation_filter=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (spaces.Box(0, 255, (84, 84, 4), np.uint8), "image observations"),
        (spaces.Discrete(16), "needs a Box"),
        (spaces.Dict({"x": spaces.Box(-1, 1, (2,))}), "needs a Box"),
    ],
)
def test_spaces_the_filter_refuses(space: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_filter("MeanStdFilter", space, where="policy 'p'")
    assert make_filter("NoFilter", space, where="policy 'p'") is None


def test_a_trainer_refuses_before_starting_anything() -> None:
    started = flow.is_initialized()
    with pytest.raises(ConfigError, match=r"'ppo' cannot use env 'FrozenLake-v1'.*needs a Box"):
        Trainer("ppo", env="FrozenLake-v1", backend="ray", **MSF)
    assert flow.is_initialized() == started  # refused before any backend started


# ------------------------------------------------------------------------ sampling
def counting(cls: type = PGConfig, **kw: Any) -> Any:
    fields: dict[str, Any] = {
        "env": CountingEnv,
        "env_config": {"episode_len": 3},
        "num_workers": 0,
        "num_envs_per_worker": 2,
        "rollout_fragment_length": 7,
        "model": {"hidden": (8,)},
        **MSF,
    }
    return cls(**(fields | kw))


def test_vector_sampler_records_what_the_filter_makes_of_each_observation(
    local_backend: None,
) -> None:
    worker = RolloutWorker(counting(), PGPolicy, worker_index=0)
    first, second = worker.sample(), worker.sample()
    obs, _, seen = reference(3, 14, num_envs=2)
    for env in range(2):  # rows: sub-env major, then time
        np.testing.assert_allclose(first[OBS][7 * env : 7 * env + 7, 0], obs[:7], atol=1e-6)
        np.testing.assert_allclose(second[OBS][7 * env : 7 * env + 7, 0], obs[7:], atol=1e-6)
    stats = worker.filters[PID]
    assert_stats(stats.running, seen[:, None])
    assert stats.delta.n == stats.running.n  # nobody took the delta yet


def test_next_observations_are_filtered_too(local_backend: None) -> None:
    config = counting(DQNConfig, num_envs_per_worker=1, rollout_fragment_length=8)
    worker = RolloutWorker(config, DQNPolicy, worker_index=0)
    batch = worker.sample()
    obs, next_obs, seen = reference(3, 8)
    np.testing.assert_allclose(batch[OBS][:, 0], obs, atol=1e-6)
    np.testing.assert_allclose(batch[NEXT_OBS][:, 0], next_obs, atol=1e-6)
    assert worker.filters[PID].running.n == len(seen) == 1 + 8 + 2  # reset, steps, 2 terminals


@pytest.mark.parametrize("engine", ["rlflow", "gymnasium"])
def test_each_observation_is_counted_once_by_every_env_engine(
    local_backend: None, engine: str
) -> None:
    """rlflow's loop resets on the step an episode ends (its last observation comes apart, in
    ``final_obs``); CartPole's vectorized engine resets on the next step (the last observation
    is the next one, the reset row is dropped). Either way each observation counts once."""
    config = PGConfig(
        env="CartPole-v1", vector_env=engine, num_envs_per_worker=4, rollout_fragment_length=50,
        num_workers=0, model={"hidden": (8,)}, **MSF,
    )  # fmt: skip
    worker = RolloutWorker(config, PGPolicy, worker_index=0)
    batch = worker.sample()
    ended = int((batch[TERMINATEDS] | batch[TRUNCATEDS]).sum())
    assert ended > 0
    n = worker.filters[PID].running.n
    if engine == "rlflow":
        assert n == 4 + 4 * 50 + ended  # resets, next observations, last ones
    else:
        assert n == 4 + 4 * 50  # the last observations were next observations


def test_no_filter_changes_nothing(local_backend: None) -> None:
    worker = RolloutWorker(counting(observation_filter="NoFilter"), PGPolicy, worker_index=0)
    assert worker.filters == {}
    batch = worker.sample()
    assert batch[OBS][:7, 0].tolist() == [0, 1, 2, 0, 1, 2, 0]


class TwoCounters(MultiAgentEnv):
    """Agents a and b count the steps of an episode of ``episode_len`` steps: a sees ``[k]``,
    b ``[100 + 10 k]``; the episode ends for both at once."""

    def __init__(self, episode_len: int = 3) -> None:
        self.possible_agents = ["a", "b"]
        self.agents = []
        box = spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.observation_spaces = {"a": box, "b": box}
        self.action_spaces = {"a": spaces.Discrete(2), "b": spaces.Discrete(2)}
        self.episode_len = episode_len
        self.k = 0

    def _obs(self) -> dict[str, Array]:
        return {
            "a": np.array([self.k], np.float32),
            "b": np.array([100 + 10 * self.k], np.float32),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.k = 0
        self.agents = ["a", "b"]
        return self._obs(), {"a": {}, "b": {}}

    def step(self, action_dict: Mapping[str, Any]) -> MultiAgentStep:
        self._check_action_keys(action_dict)
        self.k += 1
        done = self.k >= self.episode_len
        if done:
            self.agents = []
        flags = {"a": done, "b": done, ALL_AGENTS: done}
        no = {"a": False, "b": False, ALL_AGENTS: False}
        return MultiAgentStep(self._obs(), {"a": 1.0, "b": 1.0}, flags, no, {"a": {}, "b": {}})


def test_multi_agent_sampler_keeps_one_filter_per_policy(local_backend: None) -> None:
    config = PGConfig(
        env=TwoCounters,
        num_workers=0,
        num_envs_per_worker=1,
        rollout_fragment_length=8,
        policies={"pa": PolicySpec(), "pb": PolicySpec()},
        policy_mapping_fn=lambda agent: f"p{agent}",
        model={"hidden": (8,)},
        **MSF,
    )
    worker = RolloutWorker(config, PGPolicy, worker_index=0)
    batch = worker.sample()
    assert isinstance(batch, MultiAgentBatch)
    for pid, offset, scale in (("pa", 0.0, 1.0), ("pb", 100.0, 10.0)):
        obs, next_obs, seen = reference(3, 8, offset=offset, scale=scale, one_batch_at_ends=False)
        rows = batch.policy_batches[pid]
        np.testing.assert_allclose(rows[OBS][:, 0], obs, atol=1e-6)
        np.testing.assert_allclose(rows[NEXT_OBS][:, 0], next_obs, atol=1e-6)
        assert_stats(worker.filters[pid].running, seen[:, None])


def test_evaluation_uses_a_frozen_copy(local_backend: None) -> None:
    worker = RolloutWorker(counting(), PGPolicy, worker_index=0)
    worker.sample()
    before = worker.filters[PID].get_state()
    policy = worker.get_policy()
    acted: list[Array] = []
    compute = policy.compute_actions

    def spy(obs: Array, *, explore: bool = True, memory: Any = None) -> Any:
        acted.append(np.array(obs))
        return compute(obs, explore=explore, memory=memory)

    policy.compute_actions = spy  # type: ignore[method-assign]
    worker.evaluate(1)
    after = worker.filters[PID].get_state()
    assert after["running"]["n"] == before["running"]["n"]
    np.testing.assert_array_equal(after["running"]["m2"], before["running"]["m2"])
    raw = np.array([[0.0], [1.0], [2.0]])  # one episode of CountingEnv(3)
    expected = worker.filters[PID](raw, update=False)
    np.testing.assert_array_equal(np.concatenate(acted), expected)


# ------------------------------------------------------------------------ sync
class NoisyEnv(gym.Env[Array, int]):
    """Seeded normal observations with very different scales per element; episodes of 4
    steps. Keeps every observation it returned in ``seen`` (for the exact statistics)."""

    observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float64)
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self.seen: list[Array] = []
        self.t = 0
        self.rng = np.random.default_rng()

    def _ob(self) -> Array:
        ob = self.rng.normal([1000.0, -5.0, 0.0], [50.0, 1.0, 1e-3])
        self.seen.append(ob)
        return ob

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Array, dict[str, Any]]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self._ob(), {}

    def step(self, action: int) -> tuple[Array, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._ob(), 1.0, self.t >= 4, False, {}


def _seen(worker: RolloutWorker) -> list[Array]:
    return [ob for env in worker.foreach_env(lambda e: e.unwrapped) for ob in env.seen]


def _filter(worker: RolloutWorker) -> MeanStdFilter:
    return worker.get_filters()[PID]


def test_sync_merges_every_workers_delta_and_broadcasts(backend: str) -> None:
    config = PGConfig(
        env=NoisyEnv,
        num_workers=2,
        num_envs_per_worker=2,
        rollout_fragment_length=6,
        num_cpus_per_worker=0,
        model={"hidden": (8,)},
        seed=0,
        **MSF,
    )
    workers = WorkerSet(config, PGPolicy)
    try:
        remotes = workers.remote_workers()
        learner = workers.local_worker().filters[PID]
        sync = SyncObservationFilters(workers)
        flow.get([w.sample.remote() for w in remotes])
        sync.sync()
        seen = [ob for part in flow.get([w.apply.remote(_seen) for w in remotes]) for ob in part]
        assert_stats(learner.running, np.array(seen))
        for state in flow.get([w.apply.remote(_filter) for w in remotes]):
            assert state.delta.n == 0 and state.running.n == learner.running.n
            assert np.array_equal(state.running.mean, learner.running.mean)
            assert np.array_equal(state.running.m2, learner.running.m2)
        # One worker samples again: it holds the merged filter plus its own new observations
        # until the next sync brings them to the learner and to the other worker.
        flow.get(remotes[0].sample.remote())
        first = flow.get(remotes[0].apply.remote(_filter))
        assert first.running.n == learner.running.n + first.delta.n > learner.running.n
        sync.sync()
        seen = [ob for part in flow.get([w.apply.remote(_seen) for w in remotes]) for ob in part]
        assert_stats(learner.running, np.array(seen))
        for state in flow.get([w.apply.remote(_filter) for w in remotes]):
            assert state.running.n == learner.running.n == len(seen)
    finally:
        workers.stop()


TINY: dict[str, Any] = {
    "env": CountingEnv,
    "env_config": {"episode_len": 3},
    "num_workers": 2,
    "num_envs_per_worker": 1,
    "rollout_fragment_length": 5,
    "model": {"hidden": (8,)},
    "min_time_s_per_iteration": 0.0,  # iterations by steps alone, not by a 1 s default floor
    **MSF,
}


# bc, marwil and cql read recorded rows, filtered (or not) when they were recorded: they refuse a
# filter of their own (tests/algorithms/test_offline_algorithms.py); so do mappo, which reads
# the team layout (masks, state) from raw observations (tests/algorithms/mappo), and qmix and vdn
# (a team's observation holds its members' action masks: tests/algorithms/qmix); alpha_zero
# plays games whose boards and masks its search reads as they are, and refuses one too; dreamerv3
# squashes observations with symlog itself and refuses a filter (tests/algorithms/dreamerv3).
EXCLUDED = {"ppo_dqn", "bc", "marwil", "cql", "mappo", "alpha_zero", "qmix", "vdn", "dreamerv3"}


@pytest.mark.parametrize("name", sorted(set(ALGORITHMS) - EXCLUDED))
def test_every_plan_syncs_the_filters_once_per_iteration(local_backend: None, name: str) -> None:
    spec = get_algorithm(name)
    extra: dict[str, Any] = {}
    if name == "ppo":
        extra = {"train_batch_size": 20, "sgd_minibatch_size": 10}
    if name == "ddppo":  # each worker's batch is its fragment
        extra = {"train_batch_size": 5, "sgd_minibatch_size": 5}
    if spaces.Discrete not in spec.policy_cls.action_space_types:  # sac, td3, apex_td3, ...
        extra = {"env_config": {"episode_len": 3, "continuous": True}, "learning_starts": 20}
    if name == "maml":  # needs a task-settable env
        extra = {"env": POINT_NAV_ID, "env_config": {"horizon": 5}, "inner_adaptation_steps": 1}
    team = name in ("maddpg", "matd3")  # a team of two: the group's observations are filtered
    if team:
        extra = {"env": "multi_cartpole", "env_config": {}, "learning_starts": 20}
        extra["train_batch_size"] = 16
        extra["groups"] = {"team": ["agent_0", "agent_1"]}
    config = spec.config_cls(**{**TINY, **extra})
    workers = WorkerSet(config, spec.policy_cls)
    try:
        plan = spec.plan(workers, config)
        assert "SyncObservationFilters" in plan.describe().to_mermaid()
        _, second = plan.take(2)
        if name != "maml" and not team:  # point navigation's returns: negative distances
            assert second["episode_return_mean"] == 3.0
        assert second["timers"]["filter_sync_time_ms"] >= 0
        assert plan.metrics.timers["filter_sync"].count == 2
        learner = workers.local_worker().filters[PID].running
        assert learner.n > 0
        for f in flow.get([w.get_filters.remote() for w in workers.remote_workers()]):
            # The merged filter as last sent, plus what the worker saw since.
            assert f[PID].running.n - f[PID].delta.n == learner.n
    finally:
        workers.stop()


def test_no_filter_adds_no_stage(local_backend: None) -> None:
    spec = get_algorithm("pg")
    config = spec.config_cls(**{**TINY, "observation_filter": "NoFilter"})
    workers = WorkerSet(config, spec.policy_cls)
    try:
        plan = spec.plan(workers, config)
        assert "SyncObservationFilters" not in plan.describe().to_mermaid()
        assert "filter_sync_time_ms" not in next(plan)["timers"]
    finally:
        workers.stop()


def test_a_multi_agent_run_syncs_each_policys_filter(local_backend: None) -> None:
    fields = {
        "env": "multi_cartpole",
        "env_config": {"num_agents": 2, "respawn": True, "horizon": 20},
        "num_workers": 2,
        "rollout_fragment_length": 8,
        "ppo": {"train_batch_size": 32, "sgd_minibatch_size": 16, "num_sgd_iter": 1},
        "dqn": {"train_batch_size": 8, "learning_starts": 1, "buffer_size": 1000},
        "model": {"hidden": (8,)},
        **MSF,
    }
    with Trainer("ppo_dqn", **fields) as trainer:
        trainer.train()
        local = trainer.workers.local_worker()
        assert sorted(local.filters) == sorted(local.policy_map)
        remote = flow.get(trainer.workers.remote_workers()[0].get_filters.remote())
        for pid, f in local.filters.items():
            assert f.running.n > 0
            assert remote[pid].running.n - remote[pid].delta.n == f.running.n


# ------------------------------------------------------------------------ checkpoints
NOT_TRAINING = {"timers", "stages", "time_this_iter_s", "time_total_s", "env_steps_per_s"}


@pytest.mark.parametrize("algo", ["pg", "ppo", "dqn"])
def test_a_restored_run_continues_identically(algo: str, tmp_path: Path) -> None:
    fields: dict[str, Any] = {
        "env": "CartPole-v1",
        "num_workers": 2,
        "seed": 1,
        "rollout_fragment_length": 16,
        "num_envs_per_worker": 2,
        "train_batch_size": 32,
        "backend": "local",
        **MSF,
    }
    if algo == "ppo":
        fields.update(sgd_minibatch_size=16, num_sgd_iter=2)
    if algo == "dqn":
        # Iterations by steps alone: with DQN's 1 s floor their lengths would follow the clock.
        fields.update(learning_starts=32, checkpoint_replay_buffers=True)
        fields.update(min_time_s_per_iteration=0.0)
    with Trainer(algo, **fields) as trainer:
        trainer.train()
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        saved = trainer.workers.local_worker().filters[PID].get_state()
        results_a = [trainer.train(), trainer.train()]
        final_a = trainer.workers.local_worker().filters[PID].get_state()
    with Trainer.restore(path, backend="local") as restored:
        local = restored.workers.local_worker().filters[PID]
        assert local.running.n == saved["running"]["n"] > 0
        np.testing.assert_array_equal(local.running.m2, saved["running"]["m2"])
        remote = flow.get(restored.workers.remote_workers()[1].get_filters.remote())[PID]
        assert remote.running.n == saved["running"]["n"]
        results_b = [restored.train(), restored.train()]
        final_b = local.get_state()
    for a, b in zip(results_a, results_b, strict=True):
        diff = {k: (a[k], b[k]) for k in a if k not in NOT_TRAINING and a[k] != b[k]}
        assert not diff, sorted(diff)
    assert final_a["running"]["n"] == final_b["running"]["n"]
    np.testing.assert_array_equal(final_a["running"]["mean"], final_b["running"]["mean"])


def test_workers_without_a_saved_state_get_the_learners_filter(tmp_path: Path) -> None:
    fields = {"env": "CartPole-v1", "backend": "local", "train_batch_size": 32, **MSF}
    with Trainer("pg", num_workers=1, rollout_fragment_length=32, **fields) as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        n = trainer.workers.local_worker().filters[PID].running.n
    with Trainer.restore(path, backend="local", num_workers=2) as restored:
        added = flow.get(restored.workers.remote_workers()[1].get_filters.remote())[PID]
        assert added.running.n == n > 0 and added.delta.n == 0


# ------------------------------------------------------------------------ export
def test_export_applies_the_learners_frozen_filter(tmp_path: Path) -> None:
    fields = {"env_wrappers": SCALED_CARTPOLE, "num_workers": 1, "train_batch_size": 64}
    with Trainer("ppo", backend="local", sgd_minibatch_size=32, **fields, **MSF) as trainer:
        trainer.train()
        trainer.train()
        local = trainer.workers.local_worker()
        learner = local.filters[PID]
        n = learner.running.n
        raw = np.random.default_rng(0).normal(0.0, 300.0, size=(50, 4)).astype(np.float32)
        actions = trainer.compute_actions(raw)
        policy_actions, _ = local.get_policy().compute_actions(
            learner(raw, update=False), explore=False
        )
        path = trainer.export_policy(tmp_path / "policy")
        assert learner.running.n == n  # acting and exporting never update it
        expected_obs = learner(raw, update=False)
    np.testing.assert_array_equal(actions, policy_actions)
    spec = json.loads((Path(path) / SPEC_FILE).read_text())
    assert spec["format_version"] == 2
    assert spec["observation_filter"]["name"] == "MeanStdFilter"
    assert spec["observation_filter"]["count"] == n
    loaded = load_policy(path)
    np.testing.assert_array_equal(loaded.obs_filter(raw), expected_obs)
    np.testing.assert_array_equal(loaded.compute_actions(raw), actions)
    assert loaded.compute_single_action(raw[3]) == actions[3]


def test_exports_without_a_filter_and_old_exports(tmp_path: Path) -> None:
    with Trainer("pg", backend="local", num_workers=0, train_batch_size=32) as trainer:
        trainer.train()
        path = Path(trainer.export_policy(tmp_path / "policy"))
        obs = np.zeros((2, 4), np.float32)
        actions = trainer.compute_actions(obs)
    spec = json.loads((path / SPEC_FILE).read_text())
    assert spec["observation_filter"] == {"name": "NoFilter"}
    assert load_policy(path).obs_filter is None
    del spec["observation_filter"]  # written before filters existed
    (path / SPEC_FILE).write_text(json.dumps({**spec, "format_version": 1}))
    np.testing.assert_array_equal(load_policy(path).compute_actions(obs), actions)
    (path / SPEC_FILE).write_text(json.dumps({**spec, "observation_filter": {"name": "Odd"}}))
    with pytest.raises(ConfigError, match=r"load_policy: .*'Odd'"):
        load_policy(path)


def test_filter_json_round_trip_is_exact() -> None:
    f = MeanStdFilter((2, 2))
    f(np.random.default_rng(3).normal(7.0, 3.0, size=(33, 2, 2)))
    record = json.loads(json.dumps(filter_to_json(f), allow_nan=False))
    x = np.random.default_rng(4).normal(7.0, 30.0, size=(5, 2, 2))
    assert np.array_equal(filter_from_json(record)(x), f(x, update=False))
    assert filter_from_json({"name": "NoFilter"}) is None and filter_from_json(None) is None


# ------------------------------------------------------------------------ Ray
@pytest.mark.ray
@pytest.mark.timeout(240)
@pytest.mark.parametrize("algo", ["ppo", "impala"])
def test_trainers_on_ray_sync_and_export(ray_backend: None, algo: str, tmp_path: Path) -> None:
    fields: dict[str, Any] = {"num_workers": 2, "rollout_fragment_length": 16, **MSF}
    fields["train_batch_size"] = 64
    if algo == "ppo":
        fields.update(sgd_minibatch_size=32, num_sgd_iter=2)
    with Trainer(algo, env="CartPole-v1", model={"hidden": (16,)}, **fields) as trainer:
        for _ in range(3):
            result = trainer.train()
        assert result["timers"]["filter_sync_time_ms"] >= 0
        learner = trainer.workers.local_worker().filters[PID]
        assert learner.running.n > 0
        remotes = flow.get([w.get_filters.remote() for w in trainer.workers.remote_workers()])
        for f in remotes:  # some merged filter, plus the worker's observations since
            assert 0 < f[PID].running.n - f[PID].delta.n <= learner.running.n
        path = trainer.export_policy(tmp_path / "policy")
        assert json.loads((Path(path) / SPEC_FILE).read_text())["observation_filter"]["count"]
        assert trainer.evaluate(1)["episodes"] == 1


# ------------------------------------------------------------------------ learning
@pytest.mark.learning
@pytest.mark.timeout(300)
def test_ppo_learns_cartpole_scaled_by_1000_with_the_filter(
    local_backend: None, tmp_path: Path
) -> None:
    """CartPole-v1 observations times 1000: PPO's tuned config with MeanStdFilter reaches 475
    within 150k env steps on seed 0 (63,488 measured; seeds 0-4: 53k to 102k). Without the
    filter seeds 0-2 stay below it in 150k (best 249, 354, 440). The greedy policy, evaluated
    and exported through the frozen filter on the raw scaled env, plays as well."""
    config = tuned_config(
        "ppo", "CartPole-v1", seed=0, env_wrappers=SCALED_CARTPOLE, min_steps_per_iteration=2000
    )
    best, steps = float("-inf"), 0
    with Trainer("ppo", config=config, **MSF) as trainer:
        while steps < 150_000 and best < 475.0:
            result = trainer.train()
            steps = result["num_env_steps_sampled"]
            best = max(best, result["episode_return_mean"] or float("-inf"))
        assert best >= 475.0, (best, steps)
        assert trainer.evaluate(5)["episode_return_mean"] >= 400.0
        path = trainer.export_policy(tmp_path / "policy")
    policy = load_policy(path)
    env = config_env_creator(config)()
    ob, _ = env.reset(seed=123)
    total, done = 0.0, False
    while not done:
        ob, reward, terminated, truncated, _ = env.step(policy.compute_single_action(ob))
        total, done = total + float(reward), terminated or truncated
    assert total >= 400.0

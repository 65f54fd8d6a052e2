"""ES and ARS (issue 45): the shared noise table, what travels to and from the workers, the
update rules against numpy references, and the bad input refused before any actor starts."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlflow import Trainer, flow
from rlflow.algorithms import get_algorithm, tuned_config
from rlflow.algorithms.ars import ARSConfig
from rlflow.algorithms.es import ESConfig
from rlflow.algorithms.perturbation import evaluate as ev
from rlflow.algorithms.perturbation import worker as wk
from rlflow.data import noise as noise_ops
from rlflow.errors import ConfigError
from rlflow.workers import RolloutWorker, WorkerSet

pytestmark = pytest.mark.timeout(120)


def _run(algo: str, iterations: int, **overrides: Any) -> list[dict[str, Any]]:
    spec = get_algorithm(algo)
    config = spec.config_cls(**{"env": "CartPole-v1", **overrides})
    workers = WorkerSet(config, spec.policy_cls)
    plan = spec.plan(workers, config)
    try:
        return [next(plan) for _ in range(iterations)]
    finally:
        plan.close()
        workers.stop()


# --------------------------------------------------------------------------- the noise table
def test_the_noise_table_is_made_once_and_workers_read_the_drivers_array(
    local_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed: list[tuple[RolloutWorker, np.ndarray]] = []
    real_install = noise_ops.install_noise

    def record(worker: RolloutWorker, key: str, array: np.ndarray) -> None:
        installed.append((worker, array))
        real_install(worker, key, array)

    monkeypatch.setattr(ev, "install_noise", record)
    before = noise_ops.noise_table_creations()
    _run(
        "es",
        2,
        num_workers=3,
        noise_seed=901,
        noise_size=50_000,
        episodes_per_batch=6,
        train_batch_size=10,
    )
    assert noise_ops.noise_table_creations() == before + 1
    # Each worker got the table once, as the driver's very array (one array in the process).
    assert len(installed) == 3
    assert len({id(w) for w, _ in installed}) == 3
    table = noise_ops.installed_noise("901:50000")
    assert all(array is table for _, array in installed)
    assert not table.flags.writeable
    expected = np.random.default_rng(901).standard_normal(50_000, dtype=np.float32)
    np.testing.assert_array_equal(table, expected)
    # A second run with the same table makes none (same key, same process).
    _run(
        "ars", 1, num_workers=2, noise_seed=901, noise_size=50_000, num_rollouts=2, rollouts_used=1
    )
    assert noise_ops.noise_table_creations() == before + 1


def test_workers_are_sent_indices_and_answer_returns_not_noise(
    local_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, tuple[Any, ...], Any]] = []
    real_apply = RolloutWorker.apply

    def spy(self: RolloutWorker, fn: Any, *args: Any) -> Any:
        out = real_apply(self, fn, *args)
        calls.append((fn, args, out))
        return out

    monkeypatch.setattr(RolloutWorker, "apply", spy)
    _run(
        "es",
        2,
        num_workers=2,
        noise_seed=902,
        noise_size=40_000,
        episodes_per_batch=8,
        train_batch_size=10,
        eval_prob=0.5,
    )
    evals = [(args, out) for fn, args, out in calls if fn is wk.evaluate_perturbations]
    installs = [args for fn, args, _ in calls if fn is ev.install_noise]
    assert len(installs) == 2 and len(evals) >= 4
    dim = None
    for (key, theta, request, stdev), out in evals:
        dim = theta.size
        assert key == "902:40000" and isinstance(stdev, float)
        assert isinstance(request, wk.PerturbationRequest)
        assert request.noise_indices.dtype == np.int64 and request.noise_indices.ndim == 1
        assert isinstance(request.eval_episodes, int) and isinstance(request.seed, int)
        k = len(request.noise_indices)
        assert isinstance(out, wk.PerturbationResult)
        np.testing.assert_array_equal(out.noise_indices, request.noise_indices)
        assert out.returns.shape == out.lengths.shape == (k, 2)
        assert out.eval_returns.shape == (request.eval_episodes,)
        # Nothing of the policy's size comes back: no noise, no parameters.
        assert all(np.asarray(a).size in (k, 2 * k, request.eval_episodes) for a in out)
    assert dim is not None and dim > 2 * max(len(a[2].noise_indices) for a, _ in evals)


def test_antithetic_pairs_are_theta_plus_and_minus_the_indexed_slices() -> None:
    table = np.random.default_rng(0).standard_normal(1000, dtype=np.float32)
    theta = np.random.default_rng(1).standard_normal(7).astype(np.float32)
    indices = np.array([0, 13, 993], dtype=np.int64)
    params = noise_ops.antithetic_params(theta, table, indices, 0.05)
    reference = []
    for i in indices:
        eps = table[i : i + 7]
        reference += [theta + np.float32(0.05) * eps, theta - np.float32(0.05) * eps]
    np.testing.assert_array_equal(params, np.stack(reference))


def test_centered_ranks_match_a_numpy_reference() -> None:
    x = np.random.default_rng(2).standard_normal((50, 2))
    ranks = np.argsort(np.argsort(x.ravel())).reshape(x.shape)
    reference = ranks.astype(np.float32) / np.float32(x.size - 1) - np.float32(0.5)
    np.testing.assert_array_equal(ev.centered_ranks(x), reference)
    assert ev.centered_ranks(x).min() == -0.5 and ev.centered_ranks(x).max() == 0.5


def test_es_gradient_and_ars_step_match_loops_over_the_pairs() -> None:
    from rlflow.algorithms.ars.plan import ars_step
    from rlflow.algorithms.es.plan import es_gradient

    rng = np.random.default_rng(3)
    table = rng.standard_normal(5000, dtype=np.float32)
    returns = rng.normal(size=(40, 2)) * 10
    indices = rng.integers(0, 5000 - 9, size=40)
    ranks = np.argsort(np.argsort(returns.ravel())).reshape(returns.shape) / 79 - 0.5
    g = (
        sum(
            (ranks[i, 0] - ranks[i, 1]) * table[j : j + 9].astype(np.float64)
            for i, j in enumerate(indices)
        )
        / 80
    )
    np.testing.assert_allclose(es_gradient(returns, indices, table, 9), g, rtol=1e-6)
    top = sorted(range(40), key=lambda i: -returns[i].max())[:8]
    sigma = returns[top].std()
    step = sum(
        (returns[i, 0] - returns[i, 1]) * table[indices[i] : indices[i] + 9] for i in top
    ) / (8 * sigma)
    got, got_sigma = ars_step(returns, indices, table, 9, rollouts_used=8)
    np.testing.assert_allclose(got, step, rtol=1e-5)
    assert got_sigma == pytest.approx(sigma)


def test_workers_play_the_perturbations_they_are_sent(local_backend: None) -> None:
    """Each answer is the return of theta + sigma eps_i, theta - sigma eps_i (in that order),
    then theta, each played alone on an env reset with the request's seed plus its row."""
    config = ESConfig(env="CartPole-v1", num_workers=1, observation_filter="NoFilter")
    worker = RolloutWorker(config, get_algorithm("es").policy_cls, worker_index=1)
    table = noise_ops.SharedNoiseTable.create(20_000, seed=903)
    noise_ops.install_noise(worker, table.key, table.array)
    policy = worker.get_policy()
    theta = np.random.default_rng(4).standard_normal(policy.num_flat).astype(np.float32)
    request = wk.PerturbationRequest(np.array([5, 700], dtype=np.int64), 1, seed=11)
    out = wk.evaluate_perturbations(worker, table.key, theta, request, 0.5)
    rows = np.concatenate(
        [noise_ops.antithetic_params(theta, table.array, [5, 700], 0.5), theta[None]]
    )
    alone = [
        wk.play_episodes(worker, policy, rows[r : r + 1], np.zeros(1, bool), 11 + r)
        for r in range(5)
    ]
    expected = np.array([float(ret[0]) for ret, _ in alone])
    np.testing.assert_array_equal(out.returns.ravel(), expected[:4])
    np.testing.assert_array_equal(out.eval_returns, expected[4:])
    np.testing.assert_array_equal(out.lengths.ravel(), [int(n[0]) for _, n in alone[:4]])
    assert len(set(expected.tolist())) > 1  # the perturbations made a difference


# --------------------------------------------------------------------------- plans
@pytest.mark.parametrize("algo", ["es", "ars"])
def test_a_plan_runs_reports_and_checkpoints_its_optimizer(local_backend: None, algo: str) -> None:
    overrides = {"noise_seed": 904, "noise_size": 30_000, "eval_prob": 1.0}
    overrides.update(
        {"episodes_per_batch": 6, "train_batch_size": 10}
        if algo == "es"
        else {"num_rollouts": 3, "rollouts_used": 2}
    )
    results = _run(algo, 3, **overrides)
    last = results[-1]
    assert last["episode_return_mean"] is not None and last["episodes_total"] > 0
    assert last["num_env_steps_sampled"] == last["num_env_steps_trained"] > 0
    assert last["counters"]["num_train_steps"] == 3
    assert last["info"]["perturbations"]["pairs"] >= 3
    assert last["info"]["learner"]["default_policy"]["update_ratio"] > 0


def test_es_policy_state_holds_adam(local_backend: None) -> None:
    trainer = Trainer(
        "es",
        env="CartPole-v1",
        backend="local",
        config={
            "noise_seed": 905,
            "noise_size": 20_000,
            "episodes_per_batch": 4,
            "train_batch_size": 10,
        },
    )
    try:
        trainer.train()
        state = trainer.workers.local_worker().get_policy().get_state()
        assert state["flat_optimizer"]["t"] == 1
        assert trainer.evaluate(2)["episodes"] == 2
    finally:
        trainer.stop()


# --------------------------------------------------------------------------- bad input
class _MultiBinaryEnv(gym.Env[np.ndarray, np.ndarray]):
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.MultiBinary(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return np.zeros(3, np.float32), 0.0, True, False, {}


@pytest.mark.parametrize("algo", ["es", "ars"])
def test_bad_input_is_refused_naming_the_key(algo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cls = ESConfig if algo == "es" else ARSConfig
    with pytest.raises(ConfigError, match=r"num_workers=0 must be >= 1"):
        cls(env="CartPole-v1", num_workers=0)
    with pytest.raises(ConfigError, match=r"noise_size=1000000000000: .* MiB, more than"):
        cls(env="CartPole-v1", noise_size=10**12)
    with pytest.raises(ConfigError, match=r"num_learners"):
        cls(env="CartPole-v1", num_learners=1)
    started: list[Any] = []
    monkeypatch.setattr(flow, "init", lambda *a, **k: started.append(a))
    with pytest.raises(ConfigError, match=r"action space .*takes Discrete or Box action spaces"):
        Trainer(algo, env=_MultiBinaryEnv, backend="local")
    assert not started  # refused before any backend (or actor) started
    if algo == "ars":
        with pytest.raises(ConfigError, match=r"rollouts_used=5 must be <= num_rollouts=4"):
            ARSConfig(env="CartPole-v1", num_rollouts=4, rollouts_used=5)


def test_the_noise_table_must_fit_a_running_ray_object_store(
    local_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flow, "cluster_nodes", lambda: [{"object_store_memory": 4e6}])
    with pytest.raises(ConfigError, match=r"ESConfig.noise_size=2000000: .*Ray object store"):
        ESConfig(env="CartPole-v1", noise_size=2_000_000)
    ESConfig(env="CartPole-v1", noise_size=900_000)


def test_tuned_configs_load() -> None:
    assert tuned_config("es", "CartPole-v1").episodes_per_batch > 0
    assert tuned_config("ars", "Swimmer-v5").rollouts_used == 2
    assert tuned_config("ars", "HalfCheetah-v5").num_rollouts == 32

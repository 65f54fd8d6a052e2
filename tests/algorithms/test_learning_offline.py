"""Learning tier for recorded experience (issue 27): BC clones the shipped PPO CartPole expert
from 50k recorded rows; MARWIL beats BC on the same expert rows mixed with a random policy's.

The data is recorded once per module with ``output=``: the shipped tuned PPO config (seed 0)
trained to a 100-episode mean of 475 (67,584 env steps), then restored with ``output`` set for
50k more env steps (the expert); and PPO at an lr of 1e-12 (its initial, near-uniform policy)
for 50k env steps (random, mean return about 22). Everything runs on the local backend, where
a seeded run reads, trains and evaluates the same way however loaded the machine is; the
evaluation (10 greedy episodes on a live env each iteration) is the only env use of the
offline runs.

Measured when written: recording 41-46 s; BC on the expert rows reached an evaluation of 496
after 71,680 rows trained (7 iterations, 5.6 s; fresh 20 episodes: 492.8); on the mixed rows,
32 iterations each (327,680 rows), the mean of the last 8 evaluations was 493.5 for MARWIL and
305.2 for BC.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlflow import Trainer
from rlflow.algorithms import get_algorithm, tuned_config
from rlflow.workers import RolloutWorker

pytestmark = [pytest.mark.learning, pytest.mark.timeout(1200)]

RECORDED_STEPS = 50_000


def _record(trainer: Trainer, steps: int) -> dict[str, Any]:
    start, result = None, {}
    while True:
        result = trainer.train()
        done = result["num_env_steps_sampled"]
        if start is None:
            start = done - result["num_env_steps_sampled_this_iter"]
        if done - start >= steps:
            return result


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("recorded")
    begin = time.perf_counter()
    config = tuned_config("ppo", "CartPole-v1", seed=0)
    with Trainer("ppo", config=config, backend="local") as trainer:
        while trainer.train()["episode_return_mean"] < 475:
            assert trainer.iteration < 100, "the PPO expert did not reach 475"
        checkpoint = trainer.save(root / "expert_checkpoint")
    expert = Trainer.restore(checkpoint, backend="local", output=str(root / "expert"))
    with expert:
        assert _record(expert, RECORDED_STEPS)["episode_return_mean"] >= 475
    random = tuned_config(
        "ppo", "CartPole-v1", seed=1, lr=1e-12, lr_schedule=None, output=str(root / "random")
    )
    with Trainer("ppo", config=random, backend="local") as trainer:
        assert _record(trainer, RECORDED_STEPS)["episode_return_mean"] < 40
    print(f"recorded expert and random data in {time.perf_counter() - begin:.1f} s")
    return {"expert": str(root / "expert"), "random": str(root / "random")}


def _fit(algo: str, inputs: list[str], iterations: int, target: float | None) -> dict[str, Any]:
    """Train ``algo`` (its CartPole tuned config, seed 0) on ``inputs`` for ``iterations`` (or
    until an evaluation reaches ``target``); the evaluations, rows trained, a fresh 20-episode
    evaluation and the seconds."""
    config = tuned_config(algo, "CartPole-v1", seed=0, input=inputs)
    start = time.perf_counter()
    returns: list[float] = []
    with Trainer(algo, config=config, backend="local") as trainer:
        for _ in range(iterations):
            result = trainer.train()
            returns.append(result["evaluation/episode_return_mean"])
            if target is not None and returns[-1] >= target:
                break
        fresh = trainer.evaluate(20, seed=5_000)["episode_return_mean"]
        rows = int(result["num_env_steps_trained"])
    seconds = time.perf_counter() - start
    print(
        f"{algo} on {[Path(i).name for i in inputs]}: evaluations {returns}, {rows} rows, "
        f"fresh {fresh:.1f}, {seconds:.1f} s"
    )
    return {"returns": returns, "rows": rows, "fresh": fresh, "seconds": seconds}


def test_bc_clones_the_ppo_expert_from_50k_recorded_steps(recorded: dict[str, str]) -> None:
    run = _fit("bc", [recorded["expert"]], iterations=30, target=450.0)
    assert run["returns"][-1] >= 450.0, run
    assert run["fresh"] >= 450.0, run


def test_marwil_beats_bc_on_expert_rows_mixed_with_random_ones(recorded: dict[str, str]) -> None:
    mixed = [recorded["expert"], recorded["random"]]
    bc = _fit("bc", mixed, iterations=32, target=None)
    marwil = _fit("marwil", mixed, iterations=32, target=None)
    last = {
        name: float(np.mean(run["returns"][-8:])) for name, run in (("bc", bc), ("marwil", marwil))
    }
    print(f"mean of the last 8 evaluations: {last}")
    # Measured (local backend, seed 0): MARWIL 493.5, BC 305.2 (BC swings between 141 and 500
    # as it imitates both policies); fresh 20-episode evaluations 500.0 and 500.0.
    assert last["marwil"] >= 450.0, (last, marwil)
    assert last["marwil"] >= last["bc"] + 100.0, (last, bc, marwil)
    assert marwil["fresh"] >= 450.0, marwil


@pytest.fixture(scope="module")
def half_trained_sac(tmp_path_factory: pytest.TempPathFactory) -> str:
    """50k Pendulum transitions of a half-trained SAC: the shipped tuned config (seed 0, an
    iteration every 500 steps) trained 3,500 env steps (greedy return about -790 when
    measured), then frozen and sampled (exploring) by a rollout worker with ``output``."""
    root = tmp_path_factory.mktemp("sac_data")
    config = tuned_config(
        "sac", "Pendulum-v1", seed=0, min_time_s_per_iteration=0.0, min_steps_per_iteration=500
    )
    with Trainer("sac", config=config, backend="local") as trainer:
        while trainer.train()["num_env_steps_sampled"] < 3500:
            pass
        weights = trainer.workers.local_worker().get_weights()
    recording = config.replace(
        output=str(root), num_envs_per_worker=8, rollout_fragment_length=25, seed=1
    )
    worker = RolloutWorker(recording, get_algorithm("sac").policy_cls, worker_index=1)
    worker.set_weights(weights)
    rows = 0
    while rows < RECORDED_STEPS:
        rows += worker.sample().count
    returns = [e.return_ for e in worker.pop_episode_stats()]
    worker.stop()
    print(f"recorded {rows} SAC transitions, their episodes' mean return {np.mean(returns):.0f}")
    assert np.mean(returns) < -500  # the data is far from solving the task
    return str(root)


def test_cql_beats_its_half_trained_data_on_pendulum(half_trained_sac: str) -> None:
    config = tuned_config("cql", "Pendulum-v1", seed=0, input=half_trained_sac)
    start = time.perf_counter()
    returns: list[float] = []
    with Trainer("cql", config=config, backend="local") as trainer:
        for _ in range(10):  # 1,000 train steps an iteration
            returns.append(trainer.train()["evaluation/episode_return_mean"])
            if returns[-1] >= -400.0:
                break
        fresh = trainer.evaluate(20, seed=5_000)["episode_return_mean"]
    print(
        f"cql: evaluations {[round(r) for r in returns]}, fresh {fresh:.0f}, "
        f"{time.perf_counter() - start:.1f} s"
    )
    # Measured (local backend, seed 0): evaluations -1484, -919, -582, -503, -539, -421, -374
    # (stopped), fresh 20 episodes -446; the data's own episodes averaged -918. Trained on,
    # the greedy return swings between -209 and -678 (iterations 8-16): offline CQL here
    # improves far past its data but does not settle, so the check is at the first reach.
    assert returns[-1] >= -400.0, returns
    assert fresh >= -500.0, fresh

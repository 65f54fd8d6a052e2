"""SIGKILL of a rollout worker's process on Ray: the run goes on, or stops naming the worker.

Each test kills one remote worker's process (``os.kill(pid, SIGKILL)``, the pid read on the
worker through ``RolloutWorker.apply``) after a few iterations. With ``-s`` the recovery tests
print the seconds from the kill to the first result after it and the sampled steps around it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rlflow import Trainer, flow
from rlflow.errors import WorkerError

pytestmark = [pytest.mark.ray, pytest.mark.timeout(400)]

SMALL: dict[str, dict[str, Any]] = {
    "ppo": {"train_batch_size": 200, "sgd_minibatch_size": 100, "num_sgd_iter": 2},
    "a3c": {"min_steps_per_iteration": 200, "min_time_s_per_iteration": 0.0},
    "impala": {
        "train_batch_size": 100,
        "min_steps_per_iteration": 200,
        "min_time_s_per_iteration": 0.0,
    },
}
"""Small iterations: a few hundred env steps each (not the async defaults' 1 s)."""


RESTARTS = "num_worker_restarts"


@pytest.fixture
def ray(ray_backend: None) -> Iterator[None]:
    """This module's Ray session, as the running backend."""
    yield


def make(algo: str, **fields: Any) -> Trainer:
    config = {"rollout_fragment_length": 25, "num_envs_per_worker": 2, **SMALL[algo], **fields}
    return Trainer(algo, env="CartPole-v1", num_workers=2, seed=0, backend="ray", **config)


def sigkill(handle: Any) -> int:
    """Kill the process of the rollout worker ``handle``; its pid."""
    pid = int(flow.get(handle.apply.remote(lambda _worker: os.getpid())))
    os.kill(pid, signal.SIGKILL)
    return pid


def train_until_recovered(trainer: Trainer, deadline_s: float) -> list[dict[str, Any]]:
    """Results until one shows the restart and every worker healthy (polled with a deadline:
    the new worker joins when its process has started)."""
    deadline = time.perf_counter() + deadline_s
    results = [trainer.train()]
    while results[-1]["num_worker_restarts"] < 1 or results[-1]["num_healthy_workers"] < 2:
        assert time.perf_counter() < deadline, results[-1]
        results.append(trainer.train())
    return results


@pytest.mark.parametrize("algo", ["ppo", "a3c", "impala"])
def test_a_killed_worker_is_recreated_and_the_run_goes_on(ray: None, algo: str) -> None:
    with make(algo) as trainer:
        before = [trainer.train() for _ in range(3)][-1]
        victim = trainer.workers.remote_workers()[1]
        pid = sigkill(victim)
        killed_at = time.perf_counter()
        results = train_until_recovered(trainer, deadline_s=120)
        recovered_s = time.perf_counter() - killed_at
        first_s = results[0]["time_this_iter_s"]
        results += [trainer.train(), trainer.train()]
        assert [r["num_worker_restarts"] for r in results[-3:]] == [1, 1, 1]
        assert [r["num_healthy_workers"] for r in results[-3:]] == [2, 2, 2]
        sampled = [before["num_env_steps_sampled"]] + [r["num_env_steps_sampled"] for r in results]
        assert sampled == sorted(set(sampled))  # strictly increasing
        new = trainer.workers.remote_workers()[1]
        assert new != victim
        assert flow.get(new.apply.remote(lambda _worker: os.getpid())) != pid
        during = [r["num_env_steps_sampled_this_iter"] for r in results[:-3]]
        print(
            f"\nMEASURE {algo}: kill -> first result {first_s:.2f}s (iteration before: "
            f"{before['time_this_iter_s']:.2f}s); kill -> both workers healthy {recovered_s:.2f}s "
            f"over {len(during)} iterations of {min(during)}..{max(during)} steps (before: "
            f"{before['num_env_steps_sampled_this_iter']}); restarts {results[-1][RESTARTS]}"
        )


@pytest.mark.parametrize(
    ("algo", "fields", "rule"),
    [
        ("ppo", {"recreate_failed_workers": False}, "recreate_failed_workers=False"),
        ("ppo", {"max_worker_restarts": 0}, "max_worker_restarts=0"),
        ("a3c", {"recreate_failed_workers": False}, "recreate_failed_workers=False"),
    ],
)
def test_without_recreation_the_error_names_the_killed_worker(
    ray: None, algo: str, fields: dict[str, Any], rule: str
) -> None:
    with make(algo, **fields) as trainer:
        trainer.train()
        sigkill(trainer.workers.remote_workers()[0])
        with pytest.raises(WorkerError, match=rf"rollout worker\(s\) \[1\] of 2 died.*{rule}"):
            for _ in range(5):
                trainer.train()

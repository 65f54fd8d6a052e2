"""``output=DIR``: what the rollout workers sample is what the files hold, byte for byte (single
agent, Dict observations, multi-agent games), and a run's end writes every worker's rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlflow import Trainer
from rlflow.algorithms import PPOConfig
from rlflow.algorithms.ppo import PPOPolicy
from rlflow.config.offline import experience_files
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.offline import read_parquet
from rlflow.workers import RolloutWorker

pytestmark = pytest.mark.timeout(300)


class DictObsEnv(gym.Env[dict[str, Any], int]):
    """Observations ``{"pos": Box(2), "mode": Discrete(3)}``; 6-step episodes."""

    observation_space = spaces.Dict(
        {"pos": spaces.Box(-1.0, 1.0, (2,), np.float32), "mode": spaces.Discrete(3)}
    )
    action_space = spaces.Discrete(2)

    def __init__(self, config: Any = None) -> None:
        self.t = 0

    def _obs(self) -> dict[str, Any]:
        return {"pos": np.array([self.t / 10, -self.t / 10], np.float32), "mode": self.t % 3}

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._obs(), float(action), self.t >= 6, False, {}


def policy_batches(batch: SampleBatch | MultiAgentBatch) -> dict[str, SampleBatch]:
    if isinstance(batch, MultiAgentBatch):
        return dict(batch.policy_batches)
    return {"default_policy": batch}


def written(root: Path) -> dict[str, list[SampleBatch]]:
    out: dict[str, list[SampleBatch]] = {}
    for path in experience_files(str(root)):
        contents = read_parquet(path)
        out.setdefault(contents.policy_id, []).extend(contents.batches)
    return out


def assert_same(a: SampleBatch, b: SampleBatch) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        assert a[name].tobytes() == b[name].tobytes(), name


@pytest.mark.parametrize(
    "env, env_config",
    [
        (DictObsEnv, {}),
        ("pettingzoo.classic.tictactoe_v3", {}),  # multi-agent, Dict observations with masks
    ],
    ids=["dict-obs", "tictactoe"],
)
def test_files_hold_exactly_the_sampled_batches(
    tmp_path: Path, env: Any, env_config: dict[str, Any]
) -> None:
    config = PPOConfig(
        env=env,
        env_config=env_config,
        num_workers=0,
        num_envs_per_worker=2,
        rollout_fragment_length=8,
        model={"hidden": (8,)},
        output=str(tmp_path),
        output_max_rows_per_file=20,
        seed=3,
    )
    worker = RolloutWorker(config, PPOPolicy, worker_index=2)
    sampled: dict[str, list[SampleBatch]] = {}
    for _ in range(5):
        for pid, part in policy_batches(worker.sample()).items():
            sampled.setdefault(pid, []).append(part)
    worker.stop()  # writes the rest
    files = written(tmp_path)
    assert sorted(files) == sorted(sampled)
    for pid, batches in sampled.items():  # the rows, in order (small batches share groups)
        assert_same(SampleBatch.concat_samples(files[pid]), SampleBatch.concat_samples(batches))
    stats = worker.output_stats()
    assert stats["rows"] == sum(b.count for bs in sampled.values() for b in bs)
    assert stats["files"] == len(experience_files(str(tmp_path)))


def pg_recording(root: Path, rows_per_file: int) -> dict[str, Any]:
    """PG on CartPole with 2 workers of 50-step fragments, writing to ``root``."""
    return {
        "env": "CartPole-v1",
        "num_workers": 2,
        "rollout_fragment_length": 50,
        "train_batch_size": 100,
        "model": {"hidden": (8,)},
        "output": str(root),
        "output_max_rows_per_file": rows_per_file,
    }


def test_a_run_writes_every_workers_rows_by_its_end(tmp_path: Path) -> None:
    # Nothing fills a file of 1,000 rows: all is written at the run's end.
    trainer = Trainer("pg", config=pg_recording(tmp_path, 1000), backend="local")
    for _ in range(3):
        result = trainer.train()
    assert not list(tmp_path.glob("default_policy/*.parquet"))
    trainer.stop()
    names = sorted(p.name for p in (tmp_path / "default_policy").iterdir())
    assert names == ["worker1-000000.parquet", "worker2-000000.parquet"]
    rows = sum(b.count for b in written(tmp_path)["default_policy"])
    assert rows == result["num_env_steps_sampled"] == 300


@pytest.mark.ray
def test_remote_ray_workers_write_their_rows(ray_session: None, tmp_path: Path) -> None:
    trainer = Trainer("pg", config=pg_recording(tmp_path, 120))
    for _ in range(3):
        result = trainer.train()
    trainer.stop()
    files = experience_files(str(tmp_path))
    assert {p.name.split("-")[0] for p in files} == {"worker1", "worker2"}
    rows = sum(b.count for b in written(tmp_path)["default_policy"])
    assert rows >= result["num_env_steps_sampled"] >= 300  # workers may sample ahead

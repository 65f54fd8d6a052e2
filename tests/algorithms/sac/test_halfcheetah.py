"""SAC on HalfCheetah-v5 (issue 14, part 2), unit tier: the shipped tuned config holds the
published settings and builds from the command line, one iteration trains on the real MuJoCo env
with finite losses, and a missing mujoco is an error naming the extra. Learning on HalfCheetah
is too slow for CI: ``benchmarks/sac_halfcheetah.py`` measures it."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest

from rlflow import Trainer, flow
from rlflow.algorithms import SACConfig, tuned_config
from rlflow.cli import main
from rlflow.cli.parser import build_parser
from rlflow.cli.resolve import resolve_run

pytestmark = pytest.mark.timeout(120)

ENV_ID = "HalfCheetah-v5"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # MuJoCo writes its warnings to MUJOCO_LOG.TXT in the working dir; keep them out of the repo.
    monkeypatch.chdir(tmp_path)


def test_tuned_config_holds_the_published_settings() -> None:
    config = tuned_config("sac", ENV_ID)
    assert isinstance(config, SACConfig)
    assert config.env == ENV_ID
    # One gradient step of 256 transitions per env step (paper, SB3 zoo, CleanRL).
    assert config.train_batch_size == 256
    assert config.training_intensity == config.train_batch_size
    assert (config.num_workers, config.num_envs_per_worker, config.rollout_fragment_length) == (
        0,
        1,
        1,
    )
    assert (config.model.hidden, config.model.activation) == ((256, 256), "relu")
    assert (config.lr, config.actor_lr, config.alpha_lr) == (3e-4, 3e-4, 3e-4)
    assert (config.buffer_size, config.learning_starts) == (1_000_000, 10_000)
    assert (config.tau, config.gamma, config.target_entropy) == (0.005, 0.99, "auto")
    assert config.twin_q and not config.prioritized_replay and config.n_step == 1


def test_train_command_applies_the_tuned_config() -> None:
    args = build_parser().parse_args(["train", "sac", "--env", ENV_ID])
    assert resolve_run(args).config == tuned_config("sac", ENV_ID)


def test_one_iteration_on_halfcheetah_has_finite_losses() -> None:
    pytest.importorskip("mujoco")
    flow.init(backend="local")
    # The tuned config, with training after 256 steps instead of 10,000 (a smaller buffer, as
    # the ring is allocated on the first write).
    config = tuned_config(
        "sac", ENV_ID, learning_starts=256, buffer_size=10_000, min_steps_per_iteration=320
    )
    with Trainer("sac", backend="local", config=config) as trainer:
        result = trainer.train()
    assert result["num_env_steps_sampled"] >= 320
    # One train batch of 256 per sampled step once the buffer holds 256 transitions.
    trained = result["num_env_steps_trained"]
    assert trained == 256 * (result["num_env_steps_sampled"] - 255)
    stats = result["info"]["learner"]["default_policy"]
    for key in ("critic_loss", "actor_loss", "alpha_loss", "alpha"):
        assert math.isfinite(stats[key]), (key, stats)
    assert 0 < stats["alpha"] < 1.0  # the temperature moved down from initial_alpha=1


def test_missing_mujoco_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mujoco", None)  # import mujoco now raises ImportError
    code = main(["train", "sac", "--env", ENV_ID, "--backend", "local", "--stop-iters", "1"])
    assert code != 0
    err = capsys.readouterr().err
    assert ENV_ID in err
    assert re.search(re.escape('pip install "rl-flow[mujoco]"'), err), err

"""DD-PPO's bad input: refused with the key, the value and what is allowed, before any actor."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlflow import flow
from rlflow.algorithms import get_algorithm, tuned_config
from rlflow.algorithms.ddppo import DDPPOConfig
from rlflow.cli import main
from rlflow.errors import ConfigError


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"num_learners": 2},
            "DDPPOConfig.num_learners=2 must be 0: DD-PPO's rollout workers are its learners",
        ),
        ({"num_workers": 0}, "DDPPOConfig.num_workers=0 must be >= 1"),
        ({"kl_coeff": 0.2}, "DDPPOConfig.kl_coeff=0.2 must be 0.0"),
        ({"sample_ahead": True}, "DDPPOConfig.sample_ahead=True must be False"),
        (
            {"train_batch_size": 1000},
            "DDPPOConfig.train_batch_size=1000 must be one worker's batch, "
            "rollout_fragment_length * num_envs_per_worker = 100 * 5 = 500",
        ),
        ({"preemption_threshold": 0.0}, "DDPPOConfig.preemption_threshold=0.0 must be in (0, 1]"),
        ({"preemption_threshold": 1.5}, "DDPPOConfig.preemption_threshold"),
        ({"preemption_min_fraction": 0.0}, "DDPPOConfig.preemption_min_fraction=0.0"),
        ({"keep_local_weights_in_sync": "yes"}, "DDPPOConfig.keep_local_weights_in_sync"),
    ],
)
def test_bad_config_names_the_key(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        DDPPOConfig(**fields)  # type: ignore[arg-type]
    assert message in str(err.value)


def test_defaults_are_rllibs_and_registered() -> None:
    config = DDPPOConfig()
    assert (config.num_workers, config.num_envs_per_worker, config.rollout_fragment_length) == (
        2,
        5,
        100,
    )
    assert (config.sgd_minibatch_size, config.num_sgd_iter, config.kl_coeff) == (50, 10, 0.0)
    assert config.keep_local_weights_in_sync and config.preemption_threshold == 0.6
    # 0.6 of 2 workers is more than the other one: never preempted; 0.6 of 3 needs 2 (= 3 - 1).
    assert not config.preempts and config.replace(num_workers=3).preempts
    assert config.preemption_min_steps == 25
    assert get_algorithm("ddppo").config_cls is DDPPOConfig
    assert tuned_config("ddppo", "CartPole-v1").num_workers == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--set", "num_learners=2"], "DDPPOConfig.num_learners=2 must be 0"),
        (["--num-workers", "0"], "DDPPOConfig.num_workers=0 must be >= 1"),
    ],
)
def test_cli_refuses_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    flow.shutdown()
    idle = flow.is_initialized()
    monkeypatch.chdir(tmp_path)
    code = main(["train", "ddppo", "--env", "CartPole-v1", "--backend", "ray", *argv])
    _, err = capsys.readouterr()
    assert code == 2 and message in err, err
    assert not Path("runs").exists() and flow.is_initialized() == idle  # nothing started

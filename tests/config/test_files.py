"""`rlflow.config.files`: one loader and one coercion rule for the CLI and `tuned_config()`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import rlflow
from rlflow.algorithms import ALGORITHMS, DQNConfig, IMPALAConfig, PPOConfig, tuned_config
from rlflow.cli.parser import UsageError, build_parser
from rlflow.cli.resolve import resolve_run
from rlflow.config.files import (
    TUNED_HARDWARE,
    build_config,
    coerce_field,
    load_tuned_config,
    parse_value,
    tuned_envs,
)
from rlflow.errors import ConfigError
from rlflow.setup import resolve_setup
from rlflow.trainer import Trainer

pytestmark = pytest.mark.timeout(120)


SHIPPED = [(name, env) for name in ALGORITHMS for env in tuned_envs(name)]
SHIPPED_GPU = [(name, env) for name in ALGORITHMS for env in tuned_envs(name, "gpu")]


def typed(value: Any) -> Any:
    """``value`` with the type of every leaf spelled out, so 16 and 16.0 differ."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(v) for v in value])
    if callable(value):
        return ("callable", getattr(value, "__qualname__", repr(value)))
    return (type(value).__name__, value)


def test_every_shipped_tuned_file_is_compared() -> None:
    files = sorted((Path(rlflow.__file__).parent / "algorithms").glob("*/tuned/*.yaml"))
    assert len(files) == len(SHIPPED) >= 12
    assert {f.parent.parent.name for f in files} == {name for name, _ in SHIPPED}
    folders = {p.name for p in (Path(rlflow.__file__).parent / "algorithms").glob("*/tuned/*/")}
    assert folders == {"gpu"} and set(TUNED_HARDWARE) == {"cpu", "gpu"}
    gpu_files = sorted((Path(rlflow.__file__).parent / "algorithms").glob("*/tuned/gpu/*.yaml"))
    assert len(gpu_files) == len(SHIPPED_GPU) >= 2
    assert {("impala", "ALE/Pong-v5"), ("appo", "ALE/Pong-v5")} <= set(SHIPPED_GPU)


@pytest.mark.parametrize(("algo", "env_id"), SHIPPED)
def test_cli_and_tuned_config_build_equal_configs(algo: str, env_id: str) -> None:
    from_library = tuned_config(algo, env_id)
    args = build_parser().parse_args(["plan", algo, "--env", env_id])
    from_cli = resolve_run(args).config
    assert from_cli == from_library
    assert typed(from_cli.to_dict()) == typed(from_library.to_dict())


@pytest.mark.parametrize(("algo", "env_id"), SHIPPED_GPU)
def test_gpu_tuned_files_load_without_a_gpu_and_the_cli_selects_them(
    algo: str, env_id: str
) -> None:
    # Building the config checks every field but no device: a GPU config validates anywhere.
    from_library = tuned_config(algo, env_id, hardware="gpu")
    assert from_library.num_gpus > 0 and from_library.env == env_id
    args = build_parser().parse_args(["plan", algo, "--env", env_id, "--tuned-for", "gpu"])
    from_cli = resolve_run(args).config
    assert typed(from_cli.to_dict()) == typed(from_library.to_dict())
    assert (
        from_cli != resolve_run(build_parser().parse_args(["plan", algo, "--env", env_id])).config
    )


def test_the_gpu_impala_pong_config_holds_the_issue_22_sizes() -> None:
    config = tuned_config("impala", "ALE/Pong-v5", hardware="gpu")
    assert isinstance(config, IMPALAConfig)
    sizes = (config.num_workers, config.num_envs_per_worker, config.rollout_fragment_length)
    assert sizes == (14, 16, 32) and config.train_batch_size == 512
    # the learner and the workers' inference on the GPU (0.73 of raw stepping against 0.61)
    assert (config.num_gpus, config.num_gpus_per_worker) == (0.25, 0.05)
    assert tuned_config("impala", "ALE/Pong-v5").num_gpus == 0  # the default stays the CPU one


def test_tuned_for_gpu_without_a_gpu_file_or_with_unknown_hardware_is_an_error() -> None:
    args = build_parser().parse_args(["plan", "ppo", "--env", "CartPole-v1", "--tuned-for", "gpu"])
    with pytest.raises(
        ConfigError, match=r"--tuned-for gpu: no gpu tuned ppo config .*'CartPole-v1'"
    ):
        resolve_run(args)
    with pytest.raises(ConfigError, match=r"hardware='tpu' must be one of \['cpu', 'gpu'\]"):
        tuned_config("impala", "ALE/Pong-v5", hardware="tpu")
    with pytest.raises(UsageError, match=r"--tuned-for: invalid choice: 'tpu'"):
        build_parser().parse_args(["plan", "ppo", "--tuned-for", "tpu"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error given without a GPU")
def test_a_gpu_tuned_config_is_refused_by_the_trainer_on_a_machine_without_one() -> None:
    setup = resolve_setup("impala", tuned_config("impala", "ALE/Pong-v5", hardware="gpu"))
    with pytest.raises(ConfigError, match=r"IMPALAConfig: num_gpus=0.25 but no GPU is visible"):
        Trainer(setup, backend="local")  # refused before the backend or any actor starts


def test_float_fields_take_ints_and_yaml_1_1_exponents() -> None:
    # training_intensity: 16 in dqn's tuned file; tuned_config() used to keep it an int.
    assert type(tuned_config("dqn", "CartPole-v1").training_intensity) is float
    assert coerce_field(DQNConfig, "training_intensity", 16) == 16.0
    assert coerce_field(PPOConfig, "lr", "1e-3") == 0.001  # PyYAML reads 1e-3 as a string
    assert coerce_field(PPOConfig, "grad_clip", None) is None
    assert coerce_field(PPOConfig, "num_sgd_iter", 3) == 3
    assert coerce_field(PPOConfig, "lr", True) is True  # a bool is no number: the config says so
    assert coerce_field(PPOConfig, "lr", "fast") == "fast"
    assert coerce_field(PPOConfig, "no_such_field", 1) == 1


def test_set_values_follow_the_same_rule() -> None:
    assert parse_value(PPOConfig, "lr", "1e-3") == 0.001
    assert parse_value(PPOConfig, "model", "{hidden: [8]}") == {"hidden": [8]}
    with pytest.raises(ConfigError, match="did you mean 'gamma'"):
        parse_value(PPOConfig, "gama", "0.5")
    with pytest.raises(ConfigError, match="not a valid value"):
        parse_value(PPOConfig, "lr", "[unclosed")
    config = build_config(
        PPOConfig, {"lr": "5e-4", "train_batch_size": 64, "sgd_minibatch_size": 32}
    )
    assert config.lr == 5e-4


def test_a_missing_tuned_file_names_the_available_ones_and_overrides_are_coerced() -> None:
    with pytest.raises(ConfigError, match=r"no tuned ppo config for env 'Pong-v5'.*CartPole-v1"):
        load_tuned_config("ppo", PPOConfig, "Pong-v5", {})
    config = tuned_config("ppo", "CartPole-v1", lr=1)
    assert config.lr == 1.0 and type(config.lr) is float

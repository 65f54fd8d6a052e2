"""Names from the command line: PettingZoo env modules, Gymnasium wrappers in YAML, dotted
``--set`` overrides; bad names fail before anything starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import yaml

from rlflow import flow
from rlflow.algorithms.pg import PGConfig
from rlflow.algorithms.ppo_dqn import PPODQNConfig
from rlflow.cli import main
from rlflow.cli.parser import build_parser
from rlflow.cli.resolve import parse_sets, resolve_run
from rlflow.config.model import ModelConfig
from rlflow.envs import config_env_creator, make_env_creator
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(120)

TINY = [
    "--backend", "local", "--num-workers", "0", "--no-tuned",
    "--set", "rollout_fragment_length=16", "--set", "train_batch_size=32",
]  # fmt: skip


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def progress(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------------ PettingZoo modules
def test_a_pettingzoo_module_trains_one_iteration(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("pettingzoo")
    code, _, err = run(
        capsys, "train", "ppo", *TINY, "--env", "pettingzoo.classic.rps_v2",
        "--set", "env_config={max_cycles: 4}", "--set", "sgd_minibatch_size=16",
        "--set", "num_sgd_iter=1", "--stop-iters", "1", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    assert code == 0, err
    (result,) = progress(tmp_path / "r")
    assert result["iteration"] == 1 and result["num_env_steps_sampled"] >= 32
    assert result["episode_len_mean"] == 4  # max_cycles reached the env


def test_a_pettingzoo_module_creator_builds_the_parallel_env_with_kwargs() -> None:
    pytest.importorskip("pettingzoo")
    env = make_env_creator("pettingzoo.classic.rps_v2", max_cycles=2)()
    assert env.possible_agents == ["player_0", "player_1"]
    env.reset(seed=0)
    actions = {"player_0": 0, "player_1": 1}
    _, _, terminated, truncated, _ = env.step(actions)
    assert not any({**terminated, **truncated}.values())
    _, _, terminated, truncated, _ = env.step(actions)
    assert all({**terminated, **truncated}.values())


def test_a_bad_pettingzoo_module_names_it_and_starts_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "train", "pg", *TINY, "--env", "pettingzoo.classic.nope_v9")
    assert code == 2 and out == ""
    assert "pettingzoo.classic.nope_v9" in err and err.count("\n") == 1
    assert not Path("runs").exists() and not flow.is_initialized()
    with pytest.raises(ConfigError, match="neither parallel_env nor env"):
        make_env_creator("pettingzoo.utils")


# ------------------------------------------------------------------------ env_wrappers
def test_wrappers_are_applied_in_order_with_their_kwargs() -> None:
    config = PGConfig(
        env_wrappers=[
            "gymnasium.wrappers.RecordEpisodeStatistics",
            {"name": "gymnasium.wrappers.TimeLimit", "kwargs": {"max_episode_steps": 3}},
        ]
    )
    env = config_env_creator(config)()
    assert isinstance(env, gym.wrappers.TimeLimit)
    assert isinstance(env.env, gym.wrappers.RecordEpisodeStatistics)
    env.reset(seed=0)
    assert [env.step(0)[3] for _ in range(3)] == [False, False, True]
    assert config_env_creator(PGConfig())().spec.id == "CartPole-v1"  # none: unchanged


def test_a_wrapper_from_yaml_is_applied(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "wrapped.yaml").write_text(
        "env: CartPole-v1\n"
        "env_wrappers:\n"
        "  - name: gymnasium.wrappers.TimeLimit\n"
        "    kwargs: {max_episode_steps: 10}\n"
    )
    code, _, err = run(
        capsys, "train", "pg", *TINY, "--config", "wrapped.yaml", "--stop-iters", "2",
        "--out", str(tmp_path / "r"),
    )  # fmt: skip
    assert code == 0, err
    results = progress(tmp_path / "r")
    assert all(0 < r["episode_len_mean"] <= 10 for r in results)
    assert results[-1]["episodes_total"] >= 64 // 10


@pytest.mark.parametrize(
    ("wrappers", "message"),
    [
        (["gymnasium.wrappers.TimeLimitt"], "did you mean gymnasium.wrappers.TimeLimit"),
        (["nowhere.Wrapper"], "cannot import 'nowhere'"),
        (["TimeLimit"], "must be a dotted path"),
        ([{"name": "gymnasium.wrappers.TimeLimit", "kw": {}}], "keys 'name' and"),
        ("gymnasium.wrappers.TimeLimit", "must be a list"),
    ],
)
def test_a_bad_wrapper_is_a_config_error_naming_it(wrappers: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=r"PGConfig\.env_wrappers") as info:
        PGConfig(env_wrappers=wrappers)
    assert message in str(info.value)


def test_a_bad_wrapper_from_the_cli_starts_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "train", "pg", *TINY, "--set", "env_wrappers=[gymnasium.wrappers.Nope]"
    )
    assert code == 2 and out == ""
    assert "env_wrappers[0]='gymnasium.wrappers.Nope'" in err
    assert not Path("runs").exists() and not flow.is_initialized()


# ------------------------------------------------------------------------ dotted --set
def resolved(*argv: str) -> Any:
    return resolve_run(build_parser().parse_args(["train", "ppo", "--no-tuned", *argv]))


def test_a_dotted_set_changes_one_key_and_keeps_the_rest(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("model: {hidden: [8], activation: relu}\n")
    spec = resolved("--config", "c.yaml", "--set", "model.hidden=[32,32]")
    assert spec.config.model == ModelConfig(hidden=(32, 32), activation="relu")
    spec = resolved("--set", "model.shared=true", "--set", "model.hidden=[4]")
    assert spec.config.model == ModelConfig(shared=True, hidden=(4,))  # on PPO's default
    # a later whole value replaces the dict; a dotted one after it merges into it
    sets = ["model={activation: tanh}", "model.hidden=[2]"]
    assert parse_sets(PGConfig, sets) == {"model": {"activation": "tanh", "hidden": [2]}}
    nested = parse_sets(PGConfig, ["env_config.a.b=1"], base={"env_config": {"a": {"c": 2}}})
    assert nested == {"env_config": {"a": {"c": 2, "b": 1}}}


def test_a_dotted_set_sets_one_field_of_a_learner_config() -> None:
    argv = ["train", "ppo_dqn", "--env", "multi_cartpole", "--set", "ppo.lr=1e-3"]
    argv += ["--set", "dqn.buffer_size=20000", "--set", "ppo.model.hidden=[16]"]
    config = resolve_run(build_parser().parse_args(argv)).config
    assert config.ppo.lr == 0.001 and config.ppo.model == ModelConfig(hidden=(16,))
    assert config.dqn.buffer_size == 20000
    # The rest of each learner's settings (from the tuned file) is kept.
    assert config.ppo.num_sgd_iter == 20 and config.dqn.n_step == 3
    sets = parse_sets(PPODQNConfig, ["ppo.gamma=0.9"], base={"ppo": {"lr": 0.01}})
    assert sets == {"ppo": {"lr": 0.01, "gamma": 0.9}}
    with pytest.raises(ConfigError, match=r"--set ppo.lrr: PPOConfig has no field 'lrr'; did you"):
        parse_sets(PPODQNConfig, ["ppo.lrr=1"])


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("modl.hidden=[8]", "'modl'"),
        ("model.hiden=[8]", "'hiden'"),
        ("lr.value=1", "--set lr.value: a dotted key sets one key of a dict field"),
        ("model..hidden=1", "empty key between dots"),
    ],
)
def test_bad_dotted_sets_name_the_key_and_start_nothing(
    capsys: pytest.CaptureFixture[str], item: str, message: str
) -> None:
    code, out, err = run(capsys, "train", "pg", *TINY, "--set", item)
    assert code == 2 and out == ""
    assert message in err, err
    assert not Path("runs").exists() and not flow.is_initialized()


def test_a_dotted_set_is_saved_whole_in_config_yaml(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(
        capsys, "train", "pg", *TINY, "--set", "model={activation: relu}",
        "--set", "model.hidden=[8]", "--stop-iters", "1", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    assert code == 0, err
    config = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())["config"]
    assert config["model"] == {**ModelConfig().to_dict(), "activation": "relu", "hidden": [8]}

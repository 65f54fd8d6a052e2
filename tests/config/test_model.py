"""The ``model`` field group (`rlflow.config.model.ModelConfig`): each algorithm's default model,
the forms a model is given in (a `ModelConfig`, a dict, a YAML block, ``--set``), its errors, and
how configs write and read it (``to_dict``/``from_dict``, configs written before it was typed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlflow.algorithms import (
    ALGORITHMS,
    ApexConfig,
    DQNConfig,
    PPOConfig,
    R2D2Config,
    SACConfig,
    TD3Config,
)
from rlflow.algorithms.apex_r2d2.config import ApexR2D2Config
from rlflow.algorithms.cql.config import CQLConfig
from rlflow.algorithms.ppo_dqn.config import PPODQNConfig
from rlflow.cli.resolve import parse_sets
from rlflow.config import AlgorithmConfig, PolicySpec, resolve_policies
from rlflow.config.files import build_config, load_config_file
from rlflow.config.model import ModelConfig
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(60)


# ------------------------------------------------------------------------ typed defaults
@pytest.mark.parametrize(
    ("cls", "hidden", "activation"),
    [
        (AlgorithmConfig, (64, 64), "tanh"),
        (PPOConfig, (64, 64), "tanh"),
        (DQNConfig, (64, 64), "relu"),
        (ApexConfig, (64, 64), "relu"),
        (SACConfig, (256, 256), "relu"),
        (TD3Config, (256, 256), "relu"),
        (CQLConfig, (256, 256), "relu"),
        (R2D2Config, (64, 64), "tanh"),
        (ApexR2D2Config, (64, 64), "tanh"),
    ],
)
def test_each_algorithm_has_its_default_model(
    cls: type[AlgorithmConfig], hidden: tuple[int, ...], activation: str
) -> None:
    model = cls().model
    assert isinstance(model, ModelConfig)
    assert (model.hidden, model.activation) == (hidden, activation)
    recurrent = cls in (R2D2Config, ApexR2D2Config)
    assert (model.use_lstm, model.use_gru) == (recurrent, False)
    assert model.custom_model is None and model.lstm_cell_size == 256 and model.max_seq_len == 20


def test_every_registered_algorithm_builds_a_typed_model() -> None:
    for spec in ALGORITHMS.values():
        assert isinstance(spec.config_cls().model, ModelConfig), spec.name


def test_r2d2s_q_network_is_recurrent_by_a_rule_a_gru_included() -> None:
    assert R2D2Config(model={"hidden": [32]}).model.use_lstm
    gru = R2D2Config(model={"use_gru": True}).model
    assert gru.use_gru and not gru.use_lstm
    assert R2D2Config(model=ModelConfig(use_gru=True)).model == gru
    assert ApexR2D2Config(model={"use_gru": True}).model.use_gru
    with pytest.raises(ConfigError, match=r"R2D2Config\.model: use_lstm and use_gru are both"):
        R2D2Config(model={"use_lstm": True, "use_gru": True})


def test_a_default_model_is_copied_for_each_config() -> None:
    first, second = DQNConfig(), DQNConfig()
    assert first.model == second.model
    assert first.model.custom_model_config is not second.model.custom_model_config


# ------------------------------------------------------------------- the forms it takes
def test_a_dict_applies_its_keys_on_top_of_the_algorithms_default() -> None:
    dqn = DQNConfig(model={"hidden": [32]}).model
    assert dqn == ModelConfig(hidden=(32,), activation="relu")
    assert SACConfig(model={"activation": "tanh"}).model.hidden == (256, 256)
    # replace() and from_dict() take a dict the same way: on the class's default, not on the
    # config's current model (a dict is a whole model, as it always was).
    small = DQNConfig(model={"hidden": [8], "shared": True})
    assert small.replace(model={"hidden": [16]}).model == ModelConfig(
        hidden=(16,), activation="relu"
    )
    assert DQNConfig.from_dict({"model": {"hidden": [32]}}) == DQNConfig(model={"hidden": [32]})


def test_dict_yaml_set_and_typed_forms_give_equal_configs(tmp_path: Path) -> None:
    typed = PPOConfig(model=ModelConfig(hidden=(32,), use_lstm=True, max_seq_len=8))
    as_dict = PPOConfig(model={"hidden": [32], "use_lstm": True, "max_seq_len": 8})
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  hidden: [32]\n  use_lstm: true\n  max_seq_len: 8\n")
    from_yaml = build_config(PPOConfig, load_config_file(path).fields)
    sets = ["model.hidden=[32]", "model.use_lstm=true", "model.max_seq_len=8"]
    from_sets = build_config(PPOConfig, parse_sets(PPOConfig, sets))
    assert typed == as_dict == from_yaml == from_sets
    assert typed.model.hidden == (32,)  # a list is taken as a tuple


def test_a_nested_learner_config_takes_a_model_dict() -> None:
    config = PPODQNConfig(ppo={"model": {"hidden": [16]}}, dqn={"model": {"hidden": [8]}})
    assert config.ppo.model == ModelConfig(hidden=(16,))
    assert config.dqn.model == ModelConfig(hidden=(8,), activation="relu")
    sets = parse_sets(PPODQNConfig, ["ppo.model.hidden=[16]", "dqn.model.hidden=[8]"])
    assert build_config(PPODQNConfig, sets) == config


def test_a_policy_of_another_algorithm_keeps_its_own_default_model() -> None:
    from rlflow.algorithms.dqn.policy import DQNPolicy
    from rlflow.algorithms.ppo.policy import PPOPolicy

    def dqn_model(run_model: dict[str, Any], overrides: dict[str, Any] | None) -> ModelConfig:
        run = PPOConfig(
            env="multi_cartpole",
            model=run_model,
            policies={"p": PolicySpec(policy_class=DQNPolicy, config=overrides)},
            policy_mapping_fn=lambda agent: "p",
        )
        return resolve_policies(run, PPOPolicy)["p"][1].model

    # As when the policies merged their defaults under the run's model dict: the run's
    # changed keys, on top of DQN's relu network.
    assert dqn_model({}, None) == DQNConfig().model
    assert dqn_model({"hidden": [32]}, None) == ModelConfig(hidden=(32,), activation="relu")
    assert dqn_model({}, {"model": {"hidden": [8]}}) == ModelConfig(hidden=(8,), activation="relu")


# -------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("cls", "model", "message"),
    [
        (PPOConfig, {"hidden": [64, -1]}, r"PPOConfig\.model\.hidden=\[64, -1\] must be a list"),
        (DQNConfig, {"activation": "swish"}, r"DQNConfig\.model\.activation='swish' is not"),
        (SACConfig, {"shared": 1}, r"SACConfig\.model\.shared=1 must be true or false"),
        (PPOConfig, {"max_seq_len": 0}, r"PPOConfig\.model\.max_seq_len=0 must be an int >= 1"),
        (
            PPOConfig,
            {"hiden": [8]},
            r"PPOConfig\.model has no field 'hiden'; did you mean 'hidden'",
        ),
        (PPOConfig, [64, 64], r"PPOConfig\.model=\[64, 64\] must be a dict of ModelConfig's"),
        (PPOConfig, {"custom_model_config": {"a": 1}}, r"PPOConfig\.model\.custom_model_config is"),
    ],
)
def test_errors_name_the_config_and_the_models_field(
    cls: type[AlgorithmConfig], model: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        cls(model=model)


def test_a_model_config_built_alone_names_itself() -> None:
    with pytest.raises(ConfigError, match=r"^ModelConfig\.hidden=\(0,\) must be a list"):
        ModelConfig(hidden=(0,))
    with pytest.raises(ConfigError, match=r"--set model\.hiden: ModelConfig has no field 'hiden'"):
        parse_sets(PPOConfig, ["model.hiden=[8]"])


# --------------------------------------------------------------------- writing and reading
@pytest.mark.parametrize(
    "config",
    [
        PPOConfig(model={"hidden": [32], "use_lstm": True}),
        DQNConfig(),
        SACConfig(model={"hidden": [64]}),
        R2D2Config(model={"use_gru": True}),
        PPOConfig(model={"custom_model": "rlflow.models:ActorCritic"}),
        PPODQNConfig(ppo={"model": {"hidden": [16]}}),
    ],
    ids=lambda config: type(config).__name__,
)
def test_to_dict_writes_a_plain_model_that_from_dict_reads_back(config: AlgorithmConfig) -> None:
    values = config.to_dict()
    model = values["model"]
    assert type(model) is dict and model == config.model.to_dict()
    assert sorted(model) == sorted(ModelConfig.field_names())
    assert isinstance(model["hidden"], list)
    assert yaml.safe_load(yaml.safe_dump(model)) == model  # YAML writes it as it is
    assert type(config).from_dict(values) == config


def test_a_config_written_before_the_model_was_typed_loads_the_same() -> None:
    # Saved configs (run dirs' config.yaml, checkpoints) held the model as the partial dict
    # the user gave, defaults left to the policies, and self_play as {} when off.
    for cls, partial in [(DQNConfig, {"hidden": [32]}), (SACConfig, {}), (R2D2Config, {})]:
        old = {**cls().to_dict(), "model": partial, "self_play": {}}
        loaded = cls.from_dict(old)
        assert loaded == cls(model=partial)
        assert loaded.self_play is None
    old_yaml = yaml.safe_load("env: CartPole-v1\nmodel: {hidden: [32]}\nself_play: {}\n")
    dqn = build_config(DQNConfig, old_yaml)
    assert dqn.model == ModelConfig(hidden=(32,), activation="relu")


def test_the_model_fields_are_declared_once_with_their_defaults() -> None:
    defaults = {f.name: ModelConfig.field_default(f.name) for f in dataclasses.fields(ModelConfig)}
    assert defaults == {
        "hidden": (64, 64),
        "activation": "tanh",
        "shared": False,
        "custom_model": None,
        "custom_model_config": {},
        "use_action_mask_as_input": False,
        "use_lstm": False,
        "use_gru": False,
        "lstm_cell_size": 256,
        "max_seq_len": 20,
        "lstm_use_prev_action": False,
        "lstm_use_prev_reward": False,
    }

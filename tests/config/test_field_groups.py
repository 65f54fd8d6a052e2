"""Configs built from field groups: every field declared and documented once, defaults set with
the ``defaults`` class keyword, each group checking its own fields."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import typing
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest

import rlflow.algorithms
import rlflow.config
from rlflow.algorithms import (
    ALGORITHMS,
    ApexConfig,
    DQNConfig,
    IMPALAConfig,
    PPOConfig,
    TD3Config,
)
from rlflow.algorithms.twin_q.config import TwinQConfig
from rlflow.config import AlgorithmConfig, FieldGroup
from rlflow.config.group import NestedGroup
from rlflow.config.training import TrainingConfig
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(60)


def _config_classes() -> list[type]:
    """Every dataclass defined in `rlflow.config` and `rlflow.algorithms` (all are configs)."""
    found = []
    for package in (rlflow.config, rlflow.algorithms):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            found += [
                c
                for c in vars(module).values()
                if inspect.isclass(c)
                and c.__module__ == module.__name__
                and dataclasses.is_dataclass(c)
            ]
    return found


CLASSES = _config_classes()


def _declared(cls: type) -> dict[str, bool]:
    """Field name -> has a docstring, for each annotation in ``cls``'s class body (source)."""
    tree = ast.parse(inspect.getsource(inspect.getmodule(cls)))  # type: ignore[arg-type]
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    out: dict[str, bool] = {}
    for stmt, after in zip(node.body, [*node.body[1:], None], strict=True):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if ast.unparse(stmt.annotation).startswith(("ClassVar", "InitVar")):
                continue
            out[stmt.target.id] = (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
                and bool(after.value.value.strip())
            )
    return out


def test_the_walk_finds_the_groups_and_every_algorithm_config() -> None:
    names = {c.__name__ for c in CLASSES}
    assert {spec.config_cls.__name__ for spec in ALGORITHMS.values()} <= names
    assert {"AlgorithmConfig", "RolloutConfig", "SGDConfig", "ReplayAlgorithmConfig"} <= names


def test_every_field_is_declared_in_exactly_one_class_body_with_a_docstring() -> None:
    # A group held whole in one field (model, self_play) names its fields apart, as
    # ``model.hidden``: its names may be a config's too (``self_play.policies``).
    homes: dict[str, list[str]] = defaultdict(list)
    undocumented = []
    for cls in CLASSES:
        for name, documented in _declared(cls).items():
            nested = issubclass(cls, NestedGroup) and cls is not NestedGroup
            homes[f"{cls.__name__}.{name}" if nested else name].append(cls.__name__)
            if not documented:
                undocumented.append(f"{cls.__name__}.{name}")
    twice = {name: where for name, where in homes.items() if len(where) > 1}
    assert twice == {}
    assert undocumented == []
    # ... and every field of every config is one of those declarations.
    fields = {f.name for cls in CLASSES for f in dataclasses.fields(cls)}
    assert fields == {name.rpartition(".")[2] for name in homes}


def test_algorithm_config_is_one_level_of_groups() -> None:
    groups = AlgorithmConfig.__bases__
    assert len(groups) == 6
    assert all(group.__bases__ == (FieldGroup,) for group in groups)
    # The groups it holds whole, each in one field.
    assert AlgorithmConfig.held_group("model").__name__ == "ModelConfig"
    assert AlgorithmConfig.held_group("self_play").__name__ == "SelfPlay"
    assert AlgorithmConfig.held_group("lr") is None


# ------------------------------------------------------------------------------ defaults=
def test_defaults_change_an_inherited_field_without_declaring_it() -> None:
    td3 = {f.name: f for f in dataclasses.fields(TD3Config)}
    twin = {f.name: f for f in dataclasses.fields(TwinQConfig)}
    assert (td3["lr"].default, twin["lr"].default) == (1e-3, 3e-4)
    # The field keeps its base's type and place; the base keeps its default.
    assert TD3Config.field_type("lr") is float
    assert TD3Config.field_type("policies_to_train") == list[str] | None
    assert list(td3)[: len(twin)] == list(twin)
    assert TD3Config().lr == 1e-3 and TwinQConfig().lr == 3e-4


def test_a_mutable_default_is_copied_for_each_config() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Padded(TrainingConfig, defaults={"lr_schedule": [[0, 0.1], [10, 0.01]]}):
        pass

    first, second = Padded(), Padded()
    assert first.lr_schedule == [[0, 0.1], [10, 0.01]]
    assert first.lr_schedule is not second.lr_schedule


@pytest.mark.parametrize(
    ("defaults", "message"),
    [
        ({"lrr": 0.1}, r"Bad: defaults names 'lrr', which no base declares; did you mean 'lr'\?"),
        ({"own": 2}, r"Bad: 'own' is declared in the class body; give its default there"),
    ],
)
def test_bad_defaults_fail_when_the_class_is_defined(
    defaults: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):

        @dataclass(frozen=True, kw_only=True)
        class Bad(TrainingConfig, defaults=defaults):
            own: int = 1
            """A field of its own."""


# --------------------------------------------------------------------------- group checks
@pytest.mark.parametrize(
    ("cls", "fields", "message"),
    [
        # A family's stricter rule keeps its message: PPO's minibatches are >= 1 rows ...
        (PPOConfig, {"sgd_minibatch_size": -1}, r"PPOConfig\.sgd_minibatch_size=-1 .* >= 1"),
        (PPOConfig, {"sgd_minibatch_size": 0}, r"PPOConfig\.sgd_minibatch_size=0 .* >= 1"),
        # ... IMPALA's may be 0 (the whole batch), not less.
        (IMPALAConfig, {"sgd_minibatch_size": -1}, r"IMPALAConfig\.sgd_minibatch_size=-1 .*>= 0"),
        (IMPALAConfig, {"num_workers": -1}, r"IMPALAConfig\.num_workers=-1 .* >= 0"),
        (IMPALAConfig, {"num_workers": 0}, r"IMPALAConfig\.num_workers=0 .* >= 1"),
        (ApexConfig, {"learner_queue_size": 0}, r"ApexConfig\.learner_queue_size=0 .* >= 1"),
        (DQNConfig, {"target_network_update_freq": -1}, r"DQNConfig\.target_network_update_f"),
        (PPOConfig, {"kl_target": 0}, r"PPOConfig\.kl_target=0 must be a number > 0"),
        (PPOConfig, {"entropy_coeff_schedule": [[5, 0.1], [0, 0.0]]}, r"entropy_coeff_schedule"),
        (PPOConfig, {"num_torch_threads": 0}, r"PPOConfig\.num_torch_threads=0 .* >= 1"),
        (PPOConfig, {"evaluation_num_episodes": 0}, r"PPOConfig\.evaluation_num_episodes=0"),
    ],
)
def test_each_group_checks_its_fields_under_the_configs_name(
    cls: type[AlgorithmConfig], fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        cls(**fields)


def test_a_check_across_two_groups_stays_with_the_config() -> None:
    with pytest.raises(ConfigError, match=r"sgd_minibatch_size=256 must be <= train_batch_size"):
        PPOConfig(train_batch_size=128, sgd_minibatch_size=256)
    assert typing.get_type_hints(PPOConfig)["sgd_minibatch_size"] is int


def test_a_keyword_that_names_no_field_is_a_config_error_naming_the_closest() -> None:
    hint = r"PPOConfig has no field 'clip_parm'; did you mean 'clip_param'\?"
    with pytest.raises(ConfigError, match=hint):
        PPOConfig(clip_parm=0.2)
    assert PPOConfig(clip_param=0.25).clip_param == 0.25  # the fields themselves still pass

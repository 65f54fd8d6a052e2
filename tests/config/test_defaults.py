"""Every config's fields and defaults are what they were when the field groups came in.

``data/defaults.json`` was generated from the configs before they were rebuilt from field groups
(each class -> field -> the ``repr`` of its default, a callable as ``<callable module:name>``); a
default changes only with this table, on purpose. ``PPODQNConfig.ppo`` / ``.dqn`` were ``{}``
(no overrides of `PPOConfig` / `DQNConfig`) and are now a default `PPOConfig` / `DQNConfig`.
``model`` was ``{}`` everywhere (its defaults lived in the policies: DQN's and Ape-X's relu, SAC's,
TD3's and CQL's two layers of 256 with relu, everyone else's two of 64 with tanh) and is now each
class's `ModelConfig` (R2D2's gets its LSTM from a rule of `R2D2Config`, not from its default);
``self_play`` was ``{}`` (off) and is now None (off).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from rlflow.algorithms import ALGORITHMS
from rlflow.algorithms.perturbation.config import PerturbationConfig
from rlflow.algorithms.q_learning.config import ReplayAlgorithmConfig
from rlflow.algorithms.twin_q.config import TwinQConfig
from rlflow.config import ActorCriticConfig, AlgorithmConfig

pytestmark = pytest.mark.timeout(60)

TABLE: dict[str, dict[str, str]] = json.loads(
    (Path(__file__).parent / "data" / "defaults.json").read_text()
)
CLASSES = [
    AlgorithmConfig,
    ActorCriticConfig,
    ReplayAlgorithmConfig,
    TwinQConfig,
    PerturbationConfig,
]
CLASSES += [spec.config_cls for spec in ALGORITHMS.values()]


def _encode(value: Any) -> str:
    if isinstance(value, AlgorithmConfig):
        # ppo_dqn's learners were dicts of overrides ({}: the config class's defaults); now
        # whole configs, written here as the fields that differ from a fresh one's.
        fresh = type(value)()
        names = [f.name for f in dataclasses.fields(value)]
        return repr({n: getattr(value, n) for n in names if getattr(value, n) != getattr(fresh, n)})
    if callable(value):
        return f"<callable {value.__module__}:{value.__qualname__}>"
    return repr(value)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    assert f.default_factory is not dataclasses.MISSING, f.name
    return f.default_factory()


def test_the_table_covers_every_algorithm_and_family_config() -> None:
    assert sorted(TABLE) == sorted(cls.__qualname__ for cls in CLASSES)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_fields_and_defaults_are_todays(cls: type[AlgorithmConfig]) -> None:
    expected = TABLE[cls.__qualname__]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert sorted(fields) == sorted(expected)
    got = {name: _encode(_default(f)) for name, f in fields.items()}
    assert got == expected

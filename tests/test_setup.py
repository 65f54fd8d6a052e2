"""`rlflow.setup` and `rlflow.lazy`: a run's config is resolved and checked without torch (the
algorithms' policies and plans load on first use), so the command line refuses bad input before
anything heavy starts and can start Ray while torch is imported beside it."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

from rlflow.algorithms import ALGORITHMS, PPOConfig, get_algorithm
from rlflow.errors import ConfigError
from rlflow.lazy import lazy_exports
from rlflow.setup import TrainerSetup, resolve_setup

pytestmark = pytest.mark.timeout(120)


def _fresh(code: str) -> str:
    """stdout of ``code`` run in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_resolving_and_refusing_a_config_imports_no_torch() -> None:
    code = (
        "import sys\n"
        "from rlflow.setup import resolve_setup\n"
        "from rlflow.errors import ConfigError\n"
        "setup = resolve_setup('ppo', env='CartPole-v1', num_workers=2)\n"
        "try:\n"
        "    resolve_setup('impala', model={'hidden': [64, -1]})\n"
        "except ConfigError as err:\n"
        "    print('refused:', err)\n"
        "print(type(setup.config).__name__, setup.config.num_workers, 'torch' in sys.modules)\n"
    )
    refused, resolved = _fresh(code).splitlines()
    assert refused.startswith("refused:") and "hidden" in refused
    assert resolved == "PPOConfig 2 False"


def test_the_command_lines_modules_import_no_torch() -> None:
    code = "import sys, rlflow.cli.commands, rlflow.cli.resolve; print('torch' in sys.modules)"
    assert _fresh(code) == "False"


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_resolves_its_policy_and_plan(name: str) -> None:
    spec = get_algorithm(name)
    assert isinstance(spec.policy_cls, type) and spec.policy_cls.__name__.endswith("Policy")
    assert callable(spec.plan) and spec.plan.__name__ == f"{name}_plan"
    package = importlib.import_module(f"rlflow.algorithms.{name}")
    for export in package.__all__:  # every name the package exports is there, lazy or not
        assert getattr(package, export) is not None, (name, export)


def test_a_setup_is_the_algorithm_and_its_checked_config() -> None:
    setup = resolve_setup("ppo", PPOConfig(lr=1e-3), num_workers=1)
    assert isinstance(setup, TrainerSetup) and setup.algorithm is get_algorithm("ppo")
    assert setup.config.lr == 1e-3 and setup.config.num_workers == 1
    with pytest.raises(ConfigError, match=r"unknown algorithm 'ppx'.*did you mean 'ppo'"):
        resolve_setup("ppx")


def test_lazy_exports_import_on_first_use_and_keep_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    package = types.ModuleType("rlflow_fake_pkg")
    package.__path__ = []  # type: ignore[attr-defined]
    sub = types.ModuleType("rlflow_fake_pkg.heavy")
    sub.Thing = object()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "rlflow_fake_pkg", package)
    monkeypatch.setitem(sys.modules, "rlflow_fake_pkg.heavy", sub)
    get, names = lazy_exports("rlflow_fake_pkg", {"Thing": "heavy"})
    package.__getattr__ = get  # type: ignore[attr-defined]
    assert "Thing" in names() and "Thing" not in vars(package)
    assert package.Thing is sub.Thing  # type: ignore[attr-defined]
    assert vars(package)["Thing"] is sub.Thing  # kept: no second lookup
    with pytest.raises(AttributeError, match=r"module 'rlflow_fake_pkg' has no attribute 'Other'"):
        get("Other")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ({"hidden": [64, -1]}, r"PPOConfig.model.hidden=\[64, -1\] must be a list of layer sizes"),
        ({"hidden": 64}, r"model.hidden=64 must be a list"),
        ({"hidden": [True]}, r"model.hidden=\[True\] must be a list"),
        ({"activation": "swish"}, r"model.activation='swish' is not supported; use one of"),
        ({"shared": "yes"}, r"model.shared='yes' must be true or false"),
    ],
)
def test_the_built_in_networks_keys_are_checked_with_the_config(
    model: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        PPOConfig(model=model)
    assert PPOConfig(model={"hidden": [], "activation": "elu", "shared": True}).model.shared


def test_the_activation_names_are_the_networks() -> None:
    from rlflow.config.model import ACTIVATION_NAMES
    from rlflow.models.nets import ACTIVATIONS

    assert sorted(ACTIVATION_NAMES) == sorted(ACTIVATIONS)

"""pip install: the wheel takes the user's torch as it is, and its extras hold the optional parts.

The slow test builds the wheel, makes a fresh venv, installs this machine's torch into it as
scripts/setup.sh does, then asks pip what installing the wheel would do (``--dry-run
--report``: resolving Ray and the rest from the index, without installing them, keeps the
test short) and installs the wheel itself without dependencies to run ``python -m rlflow
--version``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import rlflow
from rlflow.cli import main
from rlflow.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"  # what scripts/setup.sh installs


def _run(*args: str | Path, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _build_wheel(out: Path) -> Path:
    pip = (sys.executable, "-m", "pip")
    _run(*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out, ROOT)
    (wheel,) = out.glob("rl_flow-*.whl")
    return wheel


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(name).decode()
    lines = text.splitlines()
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]


def _torch_version(python: Path) -> str:
    code = "import importlib.metadata as m; print(m.version('torch'))"
    return _run(python, "-c", code).strip()


@pytest.mark.packaging
@pytest.mark.timeout(900)
def test_wheel_installs_beside_the_users_torch(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", TORCH)
    before = _torch_version(python)
    assert before.startswith("2.13.0")
    report = tmp_path / "report.json"
    out = _run(python, "-m", "pip", "install", "--dry-run", "--report", report, wheel)
    items = json.loads(report.read_text())["install"]
    to_install = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in items}
    assert "ray" in to_install  # the wheel itself is installed below (--no-deps)
    assert "torch" not in to_install, to_install
    assert not re.search(r"(Collecting|Downloading) torch\b", out), out
    assert re.search(r"Requirement already satisfied: torch>=2\.3\b", out), out
    _run(python, "-m", "pip", "install", "-q", "--no-deps", wheel)
    assert _run(python, "-m", "rlflow", "--version").strip() == f"rlflow {rlflow.__version__}"
    assert _torch_version(python) == before


def test_optional_parts_are_extras_not_dependencies(tmp_path: Path) -> None:
    requires = _requires(_build_wheel(tmp_path))
    core = [r for r in requires if "extra ==" not in r]
    assert not [r for r in core if re.match(r"(ale-py|pettingzoo|moviepy|matplotlib)\b", r)]
    assert "torch>=2.3" in core
    ray = next(r for r in core if r.startswith("ray"))
    assert ">=2.40" in ray and "<3" in ray and "2.61" not in ray
    extras = {m.group(1) for r in requires if (m := re.search(r'extra == "([a-z]+)"', r))}
    wanted = {"atari", "envpool", "multiagent", "mujoco", "tune", "tensorboard", "video", "plot"}
    wanted |= {"bench", "all", "dev"}
    assert wanted <= extras, wanted - extras
    assert any(r.startswith("ale-py") and 'extra == "atari"' in r for r in requires)
    assert any(r.startswith("mujoco") and 'extra == "mujoco"' in r for r in requires)
    assert any(r.startswith("pettingzoo") and 'extra == "multiagent"' in r for r in requires)
    assert any(r.startswith("mpe2") and 'extra == "multiagent"' in r for r in requires)
    # envpool 1.2.x wheels fail at import: the extra stays on 1.1.x.
    assert any(
        r.startswith("envpool") and "<1.2" in r and 'extra == "envpool"' in r for r in requires
    )


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"rlflow {rlflow.__version__}"
    out = _run(sys.executable, "-m", "rlflow", "--version")
    assert out.strip() == f"rlflow {rlflow.__version__}"


def test_missing_ale_py_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlflow.envs.atari import register_ale_envs

    monkeypatch.setitem(sys.modules, "ale_py", None)  # import ale_py now raises ImportError
    with pytest.raises(ConfigError, match=re.escape('pip install "rl-flow[atari]"')):
        register_ale_envs()


def test_missing_pettingzoo_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlflow.envs.multi_agent import from_pettingzoo

    monkeypatch.setitem(sys.modules, "pettingzoo", None)
    monkeypatch.setitem(sys.modules, "pettingzoo.utils", None)
    monkeypatch.setitem(sys.modules, "pettingzoo.utils.conversions", None)
    with pytest.raises(ConfigError, match=re.escape('pip install "rl-flow[multiagent]"')):
        from_pettingzoo(object())

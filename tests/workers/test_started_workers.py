"""Remote workers started before the rest of a run (`rlflow.workers.placement`): started without
torch, adopted by one `WorkerSet` (or `Trainer`) of the same config, stopped when nobody
adopts them; and the command line starting them when it connects to a running Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rlflow import Trainer, flow
from rlflow.algorithms import PGConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.errors import ConfigError, WorkerError
from rlflow.setup import resolve_setup
from rlflow.testing.envs import CountingEnv
from rlflow.testing.workers import COUNTING_DEFAULTS
from rlflow.workers import WorkerSet
from rlflow.workers.placement import start_remote_workers

pytestmark = pytest.mark.timeout(180)

PG_POLICY = "rlflow.algorithms.pg.policy:PGPolicy"
ROOT = Path(__file__).resolve().parents[2]


def pid_of(worker: Any) -> int:
    """On the actor: its process id."""
    return os.getpid()


def test_the_modules_that_start_workers_import_no_torch() -> None:
    code = (
        "import sys, rlflow.workers.placement, rlflow.workers.rollout_worker, rlflow.models;"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_worker_set_adopts_the_workers_started_for_its_config(backend: str) -> None:
    config = PGConfig(**COUNTING_DEFAULTS)
    started = start_remote_workers(config, PG_POLICY)
    workers = WorkerSet(config, PGPolicy, started=started)
    try:
        assert workers.remote_workers() == list(started.actors)
        assert started.adopted
        batches = flow.get([w.sample.remote() for w in workers.remote_workers()])
        assert [b.count for b in batches] == [4, 4]
        assert [b["obs"][:4, 0].tolist() for b in batches] == [[0, 1, 2, 0]] * 2
        started.stop()  # adopted: the set owns them, this does nothing
        assert len(flow.get([w.apply.remote(pid_of) for w in workers.remote_workers()])) == 2
    finally:
        workers.stop()


def test_workers_started_for_another_config_are_refused(local_backend: None) -> None:
    config = PGConfig(**COUNTING_DEFAULTS)
    started = start_remote_workers(config, PG_POLICY)
    other = config.replace(rollout_fragment_length=8)
    with pytest.raises(ConfigError, match=r"WorkerSet\(started=\.\.\.\): .*another config"):
        WorkerSet(other, PGPolicy, started=started)
    assert not started.adopted
    workers = WorkerSet(config, PGPolicy, started=started)
    try:  # adopted once: a second set may not take them too
        with pytest.raises(ConfigError, match="another WorkerSet owns them"):
            WorkerSet(config, PGPolicy, started=started)
    finally:
        workers.stop()


def test_workers_nobody_adopted_are_stopped(local_backend: None) -> None:
    started = start_remote_workers(PGConfig(**COUNTING_DEFAULTS), PG_POLICY)
    started.stop()
    with pytest.raises(WorkerError):
        flow.get(started.actors[0].sample.remote())


def test_a_trainer_that_cannot_adopt_them_stops_them(local_backend: None) -> None:
    setup = resolve_setup("pg", env=CountingEnv, num_workers=2, rollout_fragment_length=4)
    started = start_remote_workers(setup.config.replace(seed=1), PG_POLICY)
    with pytest.raises(ConfigError, match="another config"):
        Trainer(setup, started_workers=started)
    with pytest.raises(WorkerError):
        flow.get(started.actors[1].sample.remote())


def test_a_trainer_whose_env_check_fails_stops_them(
    local_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rlflow.trainer

    def failing_check(setup: Any) -> Any:
        raise ConfigError("the env's check failed")

    monkeypatch.setattr(rlflow.trainer, "_build_learner", failing_check)
    setup = resolve_setup("pg", env=CountingEnv, num_workers=2, rollout_fragment_length=4)
    started = start_remote_workers(setup.config, PG_POLICY)
    with pytest.raises(ConfigError, match="the env's check failed"):
        Trainer(setup, started_workers=started)
    assert started.stopped and not started.adopted
    with pytest.raises(WorkerError):
        flow.get(started.actors[0].sample.remote())


DRIVER = textwrap.dedent(
    """
    import json, sys
    from rlflow.cli import main
    from rlflow.workers import placement

    seen, calls = {}, []
    start = placement.start_remote_workers

    def recording(config, policy, **kwargs):
        seen["torch_imported"] = "torch" in sys.modules
        seen["policy"] = policy
        calls.append(start(config, policy, **kwargs))
        return calls[-1]

    placement.start_remote_workers = recording
    seen["code"] = main(sys.argv[2:])
    seen["calls"] = len(calls)
    seen["adopted"] = [c.adopted for c in calls]
    with open(sys.argv[1], "w") as f:
        json.dump(seen, f)
    """
)


@pytest.mark.ray
def test_the_cli_starts_the_workers_before_torch_when_ray_runs(
    ray_session: None, tmp_path: Path
) -> None:
    import ray

    address = ray.get_runtime_context().gcs_address
    record = tmp_path / "seen.json"
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    command = ["train", "pg", "--env", "CartPole-v1", "--num-workers", "2", "--stop-iters", "1"]
    command += ["--backend", "ray", "--address", address, "--out", str(tmp_path / "run")]
    out = subprocess.run(
        [sys.executable, str(driver), str(record), *command],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(record.read_text())
    assert seen["code"] == 0
    assert seen["calls"] == 1
    assert seen["torch_imported"] is False  # the workers started before torch was imported
    assert seen["policy"] == PG_POLICY
    assert seen["adopted"] == [True]  # the trainer took them, it started none of its own
    assert "done (iteration=1 >= 1): 1 iterations" in out.stdout, out.stdout

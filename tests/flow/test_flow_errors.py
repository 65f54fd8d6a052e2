"""Errors keep their type and gain a note naming the stage and shard; nothing hangs."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from rlflow import flow
from rlflow.errors import ConfigError, ContextError, WorkerError

pytestmark = pytest.mark.timeout(120)


class Boom(ValueError):
    """A user error type that must reach the caller unchanged."""


def explode(x: int) -> int:
    if x == 3:
        raise Boom(f"bad item {x}")
    return x


def leaks_stop_iteration(x: int) -> int:
    if x == 1:
        raise StopIteration
    return x


def notes(err: BaseException) -> str:
    return "\n".join(getattr(err, "__notes__", []))


def test_error_in_local_stage_keeps_type_and_names_stage() -> None:
    it = flow.from_iterable(range(5)).for_each(explode)
    with pytest.raises(Boom, match="bad item 3") as info:
        it.take(5)
    assert "stage 'for_each(explode)#" in notes(info.value)
    assert "(driver)" in notes(info.value)
    assert info.value.__traceback__ is not None


def test_error_on_shard_keeps_type_and_names_stage_and_shard(backend: str) -> None:
    it = flow.from_range(6, num_shards=2).for_each(explode).gather_sync()
    with pytest.raises(Boom, match="bad item 3") as info:
        it.take(6)
    text = notes(info.value)
    assert "stage 'for_each(explode)#" in text
    assert "shard 1 of from_range[6, shards=2]" in text
    if backend == "ray":
        assert "remote traceback" in text and "explode" in text


def test_error_in_async_gather_names_shard(backend: str) -> None:
    it = flow.from_range(6, num_shards=2).for_each(explode).gather_async()
    with pytest.raises(Boom) as info:
        it.take(6)
    assert "shard 1 of from_range[6, shards=2]" in notes(info.value)


def test_stop_iteration_in_user_code_is_an_error_not_an_end(backend: str) -> None:
    local = flow.from_iterable(range(3)).for_each(leaks_stop_iteration)
    with pytest.raises(RuntimeError, match="StopIteration was raised inside"):
        local.take(3)
    remote = flow.from_range(4, num_shards=1).for_each(leaks_stop_iteration).gather_sync()
    with pytest.raises(RuntimeError, match="StopIteration was raised inside"):
        remote.take(4)


def test_dead_shard_actor_gives_worker_error_naming_the_shard(backend: str) -> None:
    it = flow.from_range(10, num_shards=2, repeat=True)
    gathered = it.gather_sync()
    assert gathered.take(2) == [0, 5]
    flow.kill(it.actors()[1])
    with pytest.raises(WorkerError) as info:
        gathered.take(10)
    assert "shard 1 of from_range[10, shards=2, repeat=True]" in notes(info.value)


def test_current_metrics_outside_a_plan_raises_clear_error() -> None:
    with pytest.raises(ContextError, match="outside a running plan"):
        flow.current_metrics()


def test_context_is_reset_after_each_operator_call() -> None:
    seen: list[Any] = []
    it = flow.from_iterable([1, 2]).for_each(lambda x: seen.append(flow.current_metrics()) or x)
    assert it.take(2) == [1, 2]
    assert seen[0] is seen[1] is it.metrics
    with pytest.raises(ContextError):
        flow.current_metrics()


def test_context_save_and_restore() -> None:
    def bump(x: int) -> int:
        ctx = flow.current_metrics()
        ctx.counters["steps"] += x
        ctx.info["last"] = x
        ctx.timers["t"].push(0.1)
        return x

    it = flow.from_iterable([1, 2, 3]).for_each(bump)
    it.take(3)
    state = it.metrics.save()
    assert state == {"counters": {"steps": 6}, "info": {"last": 3}}
    other = flow.from_iterable([]).metrics
    other.restore(state)
    assert other.counters["steps"] == 6 and other.info == {"last": 3}
    assert other.timers["t"].count == 0


def test_backend_errors() -> None:
    with pytest.raises(ConfigError, match="backend must be one of"):
        flow.init(backend="spark")
    with pytest.raises(ConfigError, match="takes no Ray arguments"):
        flow.init(backend="local", num_cpus=2)


def test_an_address_nothing_listens_on_is_refused_within_its_timeout() -> None:
    code = (
        "import time\n"
        "from rlflow import flow\n"
        "from rlflow.errors import ConfigError\n"
        "start = time.monotonic()\n"
        "try:\n"
        "    flow.init('ray', address='127.0.0.1:1', ray_init_timeout_s=1.0)\n"
        "except ConfigError as err:\n"
        "    print(f'{time.monotonic() - start:.1f}', err)\n"
        "import ray\n"
        "print(ray.is_initialized())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    refused, initialized = done.stdout.strip().splitlines()
    seconds, message = refused.split(" ", 1)
    assert 0.5 <= float(seconds) < 5.0
    assert message.startswith("cannot reach a Ray cluster at address '127.0.0.1:1' within 1 s")
    assert initialized == "False"


def test_ray_reports_a_lost_object_as_object_lost_error() -> None:
    """Ray's OwnerDiedError (a call's argument whose owner died, raised as the call's cause or
    by a fetch) reaches the caller as `ObjectLostError`, a `WorkerError`, not as Ray's own
    type; the Ape-X store drops such a batch (``test_replay_shard_failures.py``)."""
    from ray.exceptions import OwnerDiedError, RayTaskError

    from rlflow.errors import ObjectLostError
    from rlflow.flow.backend.ray_backend import translate

    lost = OwnerDiedError("00" * 28, None, "")
    for err in (lost, RayTaskError("add_batch", "traceback", lost)):
        out = translate(err)
        assert isinstance(out, ObjectLostError) and isinstance(out, WorkerError)
        assert out.__cause__ is lost

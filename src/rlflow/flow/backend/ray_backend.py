"""The Ray backend: thin wrappers over Ray core that translate its errors.

A task error reaches the caller as the original exception (its type, its notes from the actor)
with the remote traceback added as a note; a dead actor becomes :class:`ActorDiedError` and an
object lost from the store (a call's argument whose owner died) :class:`ObjectLostError` (both
:class:`WorkerError`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from ray.exceptions import ObjectLostError as RayObjectLostError

from rlflow.errors import ActorDiedError, ObjectLostError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def translate(err: BaseException) -> BaseException:
    """The exception a caller should see for a Ray error ``err``."""
    if isinstance(err, RayTaskError):
        cause = getattr(err, "cause", None)
        if isinstance(cause, RayObjectLostError):  # an argument of the task is gone
            return _lost(cause)
        if isinstance(cause, Exception) and not isinstance(cause, RayActorError):
            if not getattr(cause, "_rlflow_remote_tb", False):
                text = _ANSI.sub("", str(err)).rstrip()
                cause.add_note(
                    f"remote traceback ({type(cause).__name__} on a Ray worker):\n{text}"
                )
                cause._rlflow_remote_tb = True  # type: ignore[attr-defined]
            return cause
        return err
    if isinstance(err, RayActorError):
        worker_err = ActorDiedError(f"actor died or is unreachable: {err}")
        worker_err.__cause__ = err
        return worker_err
    if isinstance(err, RayObjectLostError):
        return _lost(err)
    return err


def _lost(err: RayObjectLostError) -> ObjectLostError:
    lost = ObjectLostError(f"an object is lost from the store: {err}")
    lost.__cause__ = err
    return lost


def get(refs: Any, timeout: float | None = None) -> Any:
    """``ray.get`` with errors translated (see :func:`translate`)."""
    try:
        return ray.get(refs, timeout=timeout)
    except GetTimeoutError:
        raise
    except (RayTaskError, RayActorError, RayObjectLostError) as err:
        raise translate(err) from None


def wait(
    refs: Sequence[Any], num_returns: int = 1, timeout: float | None = None
) -> tuple[list[Any], list[Any]]:
    """``ray.wait`` (results are fetched to this node)."""
    return ray.wait(list(refs), num_returns=num_returns, timeout=timeout)


def put(value: Any) -> Any:
    """``ray.put``."""
    return ray.put(value)


def kill(handle: Any) -> None:
    """``ray.kill`` without restart."""
    ray.kill(handle, no_restart=True)


def placement_group(bundles: list[dict[str, float]], strategy: str, timeout_s: float) -> Any:
    """``ray.util.placement_group``, waited for up to ``timeout_s``; None when it is not
    placed by then (it is removed)."""
    from ray.util import placement_group as make_group
    from ray.util import remove_placement_group

    group = make_group(bundles, strategy=strategy)
    if group.wait(timeout_seconds=timeout_s):
        return group
    remove_placement_group(group)
    return None


def bundle_options(group: Any, index: int) -> dict[str, Any]:
    """Actor options that place an actor in bundle ``index`` of ``group``."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index)
    return {"scheduling_strategy": strategy}


def current_placement_group() -> tuple[Any, int] | None:
    """The placement group this process runs in and its bundle count; None outside one (the
    driver) or when Ray is not initialized."""
    from ray.util import get_current_placement_group

    if not ray.is_initialized():
        return None
    group = get_current_placement_group()
    return None if group is None else (group, int(group.bundle_count))


def remove_placement_group(group: Any) -> None:
    """``ray.util.remove_placement_group`` (a no-op once Ray is down)."""
    from ray.util import remove_placement_group as remove

    if ray.is_initialized():
        remove(group)


def cluster_nodes() -> list[dict[str, float]]:
    """The total resources of each alive node (``ray.nodes()``)."""
    nodes = ray.nodes()  # type: ignore[no-untyped-call]
    return [dict(node["Resources"]) for node in nodes if node.get("Alive")]


def cluster_resources() -> dict[str, float]:
    """``ray.cluster_resources()``."""
    return dict(ray.cluster_resources())  # type: ignore[no-untyped-call]


def available_resources() -> dict[str, float]:
    """``ray.available_resources()``."""
    return dict(ray.available_resources())  # type: ignore[no-untyped-call]


def request_resources(bundles: list[dict[str, float]]) -> None:
    """``ray.autoscaler.sdk.request_resources(bundles=...)``."""
    from ray.autoscaler.sdk import request_resources as request

    request(bundles=bundles)

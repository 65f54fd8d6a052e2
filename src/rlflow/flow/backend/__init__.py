"""One Ray-shaped facade over two execution backends.

``ray`` runs actors as Ray actors (a local Ray started for you, or a cluster at ``address=``);
``local`` runs them as plain objects in this process (deterministic, steppable in pdb). All of
rlflow talks to actors only through these functions, so the same actor code runs on both::

    flow.init(backend="local")
    Counter = flow.remote(MyCounter)
    handle = Counter.remote(start=1)
    assert flow.get(handle.add.remote(2)) == 3

Inside a Ray worker process the backend is found on first use (Ray is initialized there), so
actors can create and call other actors through the same facade.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from rlflow.errors import ConfigError
from rlflow.flow.backend import local as _local
from rlflow.flow.backend.reaper import end_session, start_local_ray, stop_monitor

log = logging.getLogger(__name__)

BACKENDS: tuple[str, ...] = ("ray", "local")

_backend: str | None = None
_started_ray = False
_session_lost = False

C = TypeVar("C")


RAY_INIT_TIMEOUT_S = 15.0
"""How long :func:`init` tries to reach a Ray cluster at an explicit ``HOST:PORT`` address."""


def init(
    backend: str = "ray", *, ray_init_timeout_s: float = RAY_INIT_TIMEOUT_S, **ray_init_kwargs: Any
) -> None:
    """Choose and start the backend.

    Args:
        backend: ``"ray"`` (the default) or ``"local"``.
        ray_init_timeout_s: with an ``address`` of the form ``HOST:PORT``, how long to try to
            reach it before a `ConfigError` naming it (Ray itself would retry for ever).
        **ray_init_kwargs: passed to ``ray.init`` (e.g. ``address=``, ``num_cpus=``). With
            ``address`` Ray connects to that cluster (without one, to the cluster named by
            the ``RAY_ADDRESS`` environment variable, as a ``ray job submit`` entrypoint
            has it); else it starts a local Ray of its own (``address="local"``: never one
            that ``ray start`` left running) whose processes never outlive this one
            (`rlflow.flow.backend.reaper`). If Ray is
            already initialized in this process it is reused as it is. ``include_dashboard``
            defaults to False. The local backend takes none.
    """
    global _backend, _started_ray, _session_lost
    _session_lost = False
    if backend not in BACKENDS:
        raise ConfigError(f"flow.init(backend={backend!r}): backend must be one of {BACKENDS}")
    if backend == "local":
        if ray_init_kwargs:
            raise ConfigError(
                f"flow.init(backend='local') takes no Ray arguments, got {sorted(ray_init_kwargs)}"
            )
        _backend = "local"
        return
    import ray

    if not ray.is_initialized():
        ray_init_kwargs.setdefault("include_dashboard", False)
        address = ray_init_kwargs.get("address")
        if address is None:
            # RAY_ADDRESS (set for a `ray job submit` entrypoint) names the cluster to join;
            # without it, a Ray of our own, not one that `ray start` left running here (Ray
            # would join that one, and refuse num_cpus).
            address = os.environ.get("RAY_ADDRESS") or "local"
            ray_init_kwargs["address"] = address
        check_reachable(address, ray_init_timeout_s)
        if address == "local":
            # A Ray of our own: its processes stop with this one, also after a SIGKILL.
            start_local_ray(**ray_init_kwargs)
        else:
            ray.init(**ray_init_kwargs)
        _started_ray = True
    _backend = "ray"


def check_reachable(address: Any, timeout_s: float) -> None:
    """Raise `ConfigError` naming ``address`` when it is ``HOST:PORT`` and nothing accepts a
    connection there within ``timeout_s`` (retried every half second); other addresses
    (None, ``"auto"``, ``"local"``, ``"ray://..."``) are Ray's to resolve.

    >>> check_reachable("127.0.0.1:1", 0.1)
    Traceback (most recent call last):
    ...
    rlflow.errors.ConfigError: cannot reach a Ray cluster at address '127.0.0.1:1' within 0.1 s \
(ConnectionRefusedError); is Ray running there (ray start --head), and is the port its GCS port?
    """
    if not isinstance(address, str) or "://" in address or address.count(":") != 1:
        return
    host, port = address.rsplit(":", 1)
    if not port.isdigit():
        return
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=max(left, 0.01))
        except OSError as err:
            if time.monotonic() + 0.5 < deadline:
                time.sleep(0.5)
                continue
            raise ConfigError(
                f"cannot reach a Ray cluster at address {address!r} within {timeout_s:g} s "
                f"({type(err).__name__}); is Ray running there (ray start --head), and is the "
                "port its GCS port?"
            ) from None
        else:
            return


def shutdown() -> None:
    """Stop the backend; Ray is shut down only if :func:`init` started it, and what is left of
    a local Ray it started is stopped by its reaper (`rlflow.flow.backend.reaper`; its
    autoscaler monitor just before ``ray.shutdown()``, which would wait 1 s for it:
    `~rlflow.flow.backend.reaper.stop_monitor`)."""
    global _backend, _started_ray, _session_lost
    if _backend == "ray" and _started_ray:
        import ray

        if not session_lost():
            stop_monitor()
            ray.shutdown()
        end_session()
    _backend = None
    _session_lost = False
    _started_ray = False


def backend_name() -> str:
    """``"ray"`` or ``"local"``; raises :class:`ConfigError` if no backend is initialized."""
    global _backend
    if _backend is None:
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            _backend = "ray"  # inside a Ray worker, or Ray started by the user
        else:
            raise ConfigError(
                "no rlflow backend is initialized: call flow.init(backend='ray') or "
                "flow.init(backend='local') first"
            )
    return _backend


def is_initialized() -> bool:
    """Whether :func:`init` was called (or Ray is running in this process)."""
    try:
        backend_name()
    except ConfigError:
        return False
    return True


def _ray_impl() -> Any:
    from rlflow.flow.backend import ray_backend

    return ray_backend


class RemoteClass(Generic[C]):
    """``flow.remote(cls)``: ``.remote(*args, **kwargs)`` creates an actor on the backend."""

    def __init__(self, cls: type[C], options: dict[str, Any] | None = None) -> None:
        self._cls = cls
        self._options = dict(options or {})
        self._ray_cls: Any = None
        self.__doc__ = cls.__doc__

    def options(self, **options: Any) -> RemoteClass[C]:
        """A copy with Ray actor options (``num_cpus``, ``max_restarts``, ...); ignored locally."""
        return RemoteClass(self._cls, {**self._options, **options})

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """Create the actor and return its handle."""
        if backend_name() == "local":
            return _local.create_actor(self._cls, args, kwargs)
        if self._ray_cls is None:
            import ray

            self._ray_cls = ray.remote(self._cls)
        if self._options:
            return self._ray_cls.options(**self._options).remote(*args, **kwargs)
        return self._ray_cls.remote(*args, **kwargs)

    def __repr__(self) -> str:
        return f"RemoteClass({self._cls.__qualname__})"


class RemoteFunction:
    """``flow.remote(fn)``: ``.remote(*args, **kwargs)`` runs ``fn`` as a task on the backend."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any] | None = None) -> None:
        self._fn = fn
        self._options = dict(options or {})
        self._ray_fn: Any = None

    def options(self, **options: Any) -> RemoteFunction:
        """A copy with Ray task options (``num_cpus``, ...); ignored locally."""
        return RemoteFunction(self._fn, {**self._options, **options})

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """Submit the task; returns its future (locally it runs now)."""
        if backend_name() == "local":
            return _local.call_now(self._fn, args, kwargs)
        if self._ray_fn is None:
            import ray

            self._ray_fn = ray.remote(self._fn)
        if self._options:
            return self._ray_fn.options(**self._options).remote(*args, **kwargs)
        return self._ray_fn.remote(*args, **kwargs)


def remote(cls_or_fn: Any = None, **options: Any) -> Any:
    """Make a class an actor class (or a function a task) on whichever backend is active.

    Usable as ``flow.remote(cls)``, ``flow.remote(cls, num_cpus=0)`` or as a decorator
    ``@flow.remote`` / ``@flow.remote(num_cpus=0)``.
    """
    if cls_or_fn is None:
        return lambda target: remote(target, **options)
    if isinstance(cls_or_fn, type):
        return RemoteClass(cls_or_fn, options)
    if callable(cls_or_fn):
        return RemoteFunction(cls_or_fn, options)
    raise ConfigError(f"flow.remote() takes a class or a function, got {type(cls_or_fn)!r}")


def get(refs: Any, timeout: float | None = None) -> Any:
    """The value of a future (or the list of values of a list of futures).

    An error raised by the remote call is re-raised with its original type and its notes; a dead
    actor raises :class:`~rlflow.errors.ActorDiedError` (a ``WorkerError``).
    """
    if backend_name() == "local":
        return _local.get(refs, timeout)
    return _ray_impl().get(refs, timeout)


def wait(
    refs: Sequence[Any], num_returns: int = 1, timeout: float | None = None
) -> tuple[list[Any], list[Any]]:
    """Split ``refs`` into (ready, not ready) as ``ray.wait`` does; order of ``refs`` is kept."""
    if backend_name() == "local":
        return _local.wait(refs, num_returns, timeout)
    return _ray_impl().wait(refs, num_returns, timeout)  # type: ignore[no-any-return]


def first_ready(refs: Iterable[Any], timeout: float | None = None) -> Any | None:
    """The first of ``refs``, in their order, that is ready; when none is ready now, waits up
    to ``timeout`` seconds (None: until one is; 0: not at all); None when none became ready.

    Use it instead of ``wait(refs, num_returns=1)`` to take one reply out of many: with several
    ready, Ray's ``wait`` returns one by no fixed rule, and the same old reference can lose to
    each newer one for as long as newer ones keep coming (an Ape-X replay shard with data was
    never read again while the other shard, below its ``learning_starts``, answered None at
    once). With ``refs`` in the order they were issued, this serves the oldest reply first. It
    costs one ``wait``, and a second one (that does not wait) over the references before the
    one the first gave, if any.
    """
    refs = list(refs)
    if not refs:
        return None
    ready, _ = wait(refs, num_returns=1, timeout=timeout)
    if not ready:
        return None
    position = refs.index(ready[0])
    if position:
        older, _ = wait(refs[:position], num_returns=position, timeout=0)
        if older:
            return older[0]
    return ready[0]


def put(value: Any) -> Any:
    """Store ``value`` once and return a reference that any actor call accepts in its place."""
    if backend_name() == "local":
        return _local.LocalFuture(value)
    return _ray_impl().put(value)


def kill(handle: Any) -> None:
    """Kill an actor; later calls on it fail with :class:`~rlflow.errors.ActorDiedError`.
    Nothing to do when the Ray session is gone (`session_lost`)."""
    if backend_name() == "local":
        _local.kill(handle)
    elif not session_lost():
        _ray_impl().kill(handle)


def session_lost() -> bool:
    """True when the Ray session this process uses no longer answers: its GCS refuses (or does
    not accept within a second) a connection, e.g. after a signal to the driver's whole process
    group stopped Ray's processes too. Ray would wait 60 s for it and then end the process, so
    the calls that stop actors and free placement groups (`kill`, `remove_placement_group`,
    `shutdown`) then do nothing: the actors went with the session. Once lost, lost until the
    next `init`. False on the local backend."""
    global _session_lost
    if _session_lost:
        return True
    ray = sys.modules.get("ray")
    if _backend != "ray" or ray is None or not ray.is_initialized():
        return False
    host, _, port = str(ray.get_runtime_context().gcs_address).rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=1.0).close()
    except (OSError, ValueError):
        _session_lost = True
        log.warning("the Ray session is gone (its GCS does not answer): nothing left to stop")
    return _session_lost


def placement_group(bundles: Sequence[dict[str, float]], strategy: str, *, timeout_s: float) -> Any:
    """Reserve ``bundles`` (one resource dict each) placed by ``strategy`` (Ray's PACK, SPREAD,
    STRICT_PACK, STRICT_SPREAD); the group, for :func:`bundle_options`.

    Waits up to ``timeout_s`` seconds for the reservation and raises :class:`ConfigError` naming
    the bundles, the strategy and the cluster's resources when it cannot be placed by then. The
    local backend reserves nothing and returns None.
    """
    if backend_name() == "local":
        return None
    group = _ray_impl().placement_group(list(bundles), strategy, timeout_s)
    if group is None:
        raise ConfigError(
            f"a placement group of {len(bundles)} bundles {list(bundles)[:1]}... with strategy "
            f"{strategy} could not be placed in {timeout_s:g} s; the cluster has "
            f"{_ray_impl().cluster_resources()}: ask for less (e.g. num_cpus_per_worker, "
            "num_workers) or add nodes"
        )
    return group


def bundle_options(group: Any, index: int) -> dict[str, Any]:
    """Options for ``RemoteClass.options(**...)`` placing an actor in bundle ``index`` of
    ``group`` (from :func:`placement_group`); empty for None (the local backend)."""
    if group is None:
        return {}
    return _ray_impl().bundle_options(group, index)  # type: ignore[no-any-return]


class EnclosingGroup(NamedTuple):
    """The placement group a process runs in (`current_placement_group`)."""

    group: Any
    """The group, for :func:`bundle_options`; whoever created it removes it."""
    num_bundles: int
    """How many bundles it has."""


def current_placement_group() -> EnclosingGroup | None:
    """The placement group this process runs in (e.g. a Ray Tune trial's actor, which runs in
    bundle 0 of its trial's group), or None: on the local backend, in a Ray driver, in an actor
    placed outside any group."""
    if backend_name() == "local":
        return None
    found = _ray_impl().current_placement_group()
    return None if found is None else EnclosingGroup(*found)


def node_address() -> str:
    """This process's node address as the cluster's other nodes reach it (Ray's node IP);
    ``"127.0.0.1"`` on the local backend."""
    if backend_name() == "local":
        return "127.0.0.1"
    import ray.util

    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


def cluster_resources() -> dict[str, float] | None:
    """The Ray cluster's total resources (``{"CPU": 4.0, "GPU": 1.0, ...}``); None on the local
    backend, where everything runs in this process."""
    if backend_name() == "local":
        return None
    return _ray_impl().cluster_resources()  # type: ignore[no-any-return]


def cluster_nodes() -> list[dict[str, float]] | None:
    """Each alive node's total resources (``ray.nodes()``); None on the local backend."""
    if backend_name() == "local":
        return None
    return _ray_impl().cluster_nodes()  # type: ignore[no-any-return]


def available_resources() -> dict[str, float] | None:
    """The Ray cluster's resources free now, summed over its nodes
    (``ray.available_resources()``, as Ray last heard from them); None on the local backend."""
    if backend_name() == "local":
        return None
    return _ray_impl().available_resources()  # type: ignore[no-any-return]


def request_resources(bundles: Sequence[dict[str, float]]) -> None:
    """Tell Ray's autoscaler that the cluster should hold ``bundles`` (one resource dict each)
    in all, running ones included (``ray.autoscaler.sdk.request_resources``): it adds nodes at
    once rather than when demand has waited. The request stands until the next call; an empty
    list withdraws it. Without an autoscaler (a fixed cluster) nothing changes; on the local
    backend nothing is asked."""
    if backend_name() == "local" or session_lost():
        return
    _ray_impl().request_resources([dict(b) for b in bundles])


def _never(_self: Any, *_args: Any, **_kwargs: Any) -> None:
    """The body of every method of an `absent_actor` (never runs: the actor is killed first)."""


@functools.cache
def _absent_class(cls: type) -> type:
    """A class with ``cls``'s public methods, none of which does anything (Ray's handles accept
    calls only to the methods of the actor's class)."""
    names = [n for n in dir(cls) if not n.startswith("__") and callable(getattr(cls, n, None))]
    return type(f"Absent{cls.__name__}", (), {n: _never for n in names})


def absent_actor(cls: type) -> Any:
    """A handle of an actor of class ``cls`` that never ran: every call on it fails with
    :class:`~rlflow.errors.ActorDiedError`, as on a dead actor's handle. A placeholder where an
    actor should be but is not yet (a rollout worker waiting for a node with room), so that
    the code that reads a set of actors treats it as one that died. It is an actor of a class
    with ``cls``'s method names and no code, created with no resources and killed at once (a
    few milliseconds on Ray)."""
    handle = remote(_absent_class(cls)).options(num_cpus=0).remote()
    kill(handle)
    return handle


def remove_placement_group(group: Any) -> None:
    """Free a group's reservation (its actors are killed); None (local) is a no-op, and so is
    a group of a Ray session that is gone (`session_lost`)."""
    if group is not None and not session_lost():
        _ray_impl().remove_placement_group(group)


def send_and_forget(handle: Any, method: str, *args: Any) -> None:
    """Call ``handle.<method>(*args)`` and drop its future: best effort, for clean-up messages.

    Never waits and never raises (a failure is logged at debug level). Nothing is sent to a Ray
    actor once Ray is shut down: the actor went with it, and a call would start a new Ray.
    """
    if not isinstance(handle, _local.LocalActorHandle):
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return
    try:
        getattr(handle, method).remote(*args)
    except Exception as err:  # noqa: BLE001 - a dead actor has nothing left to clean up
        log.debug("send_and_forget(%r, %s) failed: %r", handle, method, err)


def ship(value: C) -> C:
    """What a remote call would hand an actor: a private copy locally, ``value`` itself on Ray.

    Ray serializes arguments, so each actor gets its own copy of a stateful callable; the local
    backend copies explicitly to keep the same semantics (actor handles are never copied).
    """
    if backend_name() == "local":
        import copy

        return copy.deepcopy(value)
    return value

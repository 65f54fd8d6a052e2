"""The local backend: every actor is a plain object in this process.

Method calls run eagerly, in call order, in the calling thread, so a plan is deterministic and can
be stepped through in pdb. Futures hold the value or the exception of the call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rlflow.errors import ActorDiedError


class LocalFuture:
    """The result of a call on the local backend: a value, or the exception the call raised."""

    __slots__ = ("_error", "_value")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    def result(self) -> Any:
        """The value, or raise the call's exception (its original type and traceback)."""
        if self._error is not None:
            raise self._error
        return self._value

    def __repr__(self) -> str:
        state = f"error={type(self._error).__name__}" if self._error else "ready"
        return f"LocalFuture({state})"


def _resolve(value: Any) -> Any:
    # Like Ray, a future passed as a top-level argument arrives as its value.
    return value.result() if isinstance(value, LocalFuture) else value


def call_now(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> LocalFuture:
    """Run ``fn`` now and capture its value or exception in a :class:`LocalFuture`."""
    try:
        args = tuple(_resolve(a) for a in args)
        kwargs = {k: _resolve(v) for k, v in kwargs.items()}
        return LocalFuture(fn(*args, **kwargs))
    except Exception as err:  # noqa: BLE001 - delivered to whoever gets the future
        return LocalFuture(error=err)


class LocalActorMethod:
    """``handle.method`` on the local backend: ``.remote(...)`` calls it now."""

    __slots__ = ("_handle", "_name")

    def __init__(self, handle: LocalActorHandle, name: str) -> None:
        self._handle = handle
        self._name = name

    def remote(self, *args: Any, **kwargs: Any) -> LocalFuture:
        """Call the method now; the future holds its value or exception."""
        handle = self._handle
        if handle._dead:
            return LocalFuture(
                error=ActorDiedError(
                    f"actor {handle!r} is dead (killed); cannot call .{self._name}()"
                )
            )
        return call_now(getattr(handle._obj, self._name), args, kwargs)

    def options(self, **_options: Any) -> LocalActorMethod:
        """Accepted for Ray compatibility; options have no effect locally."""
        return self


class LocalActorHandle:
    """A handle to a local actor. Hashable; copying or deep-copying returns the same handle."""

    __slots__ = ("_dead", "_label", "_obj")

    def __init__(self, obj: Any, label: str) -> None:
        self._obj = obj
        self._dead = False
        self._label = label

    def __getattr__(self, name: str) -> LocalActorMethod:
        if name.startswith("__"):
            raise AttributeError(name)
        if not callable(getattr(self._obj, name, None)):
            raise AttributeError(f"actor {self._label} has no method {name!r}")
        return LocalActorMethod(self, name)

    def __copy__(self) -> LocalActorHandle:
        return self

    def __deepcopy__(self, _memo: dict[int, Any]) -> LocalActorHandle:
        return self

    def __repr__(self) -> str:
        return f"LocalActor({self._label})"


_next_id = 0


def create_actor(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> LocalActorHandle:
    """Instantiate ``cls`` in this process and wrap it in a handle."""
    global _next_id
    _next_id += 1
    obj = cls(*[_resolve(a) for a in args], **{k: _resolve(v) for k, v in kwargs.items()})
    return LocalActorHandle(obj, f"{cls.__name__}#{_next_id}")


def kill(handle: LocalActorHandle) -> None:
    """Mark the actor dead: later calls on it fail with :class:`ActorDiedError`."""
    handle._dead = True


def get(refs: Any, timeout: float | None = None) -> Any:
    """Values of a future or a list of futures (plain values pass through)."""
    del timeout  # every local future is already complete
    if isinstance(refs, list):
        return [_resolve(r) for r in refs]
    return _resolve(refs)


def wait(
    refs: Sequence[Any], num_returns: int = 1, timeout: float | None = None
) -> tuple[list[Any], list[Any]]:
    """Every local future is complete: the first ``num_returns`` are returned as ready."""
    del timeout
    refs = list(refs)
    return refs[:num_returns], refs[num_returns:]

"""Typed singleton values that travel through a plan instead of exceptions."""

from __future__ import annotations

from typing import Any, Final, final


@final
class _NotReady:
    """Type of :data:`NOT_READY`: "this iterator has nothing to give right now".

    An iterator built to poll (inside a non-deterministic ``union``) yields it instead of blocking
    so that the union can move on to another input. Every built-in operator passes it through
    untouched; a function given to ``for_each`` may return it to be called again later with the
    same item (this is how ``Enqueue`` applies backpressure). Users reading a plan at the top level
    never see it: the top-level iterator waits instead.
    """

    _instance: _NotReady | None = None

    def __new__(cls) -> _NotReady:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_READY"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_NotReady, ())

    def __bool__(self) -> bool:
        return False


@final
class _ShardEnd:
    """Type of :data:`SHARD_END`: returned by a shard actor when its stream has ended.

    The end of a shard crosses process boundaries as this value, never as a ``StopIteration``
    raised through a remote call.
    """

    _instance: _ShardEnd | None = None

    def __new__(cls) -> _ShardEnd:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "SHARD_END"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_ShardEnd, ())


NOT_READY: Final = _NotReady()
"""The typed "nothing yet" value (see :class:`_NotReady`)."""

SHARD_END: Final = _ShardEnd()
"""Marks the end of a shard's stream in replies from shard actors."""

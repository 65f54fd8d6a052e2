"""The per-item stages of a local iterator chain (what ``for_each``, ``filter``, ... build).

Each stage is a small picklable object; calling it with the upstream iterator and the
:class:`BuildEnv` returns the downstream iterator. Every stage passes ``NOT_READY`` through
untouched, runs user code with the plan's context current, counts items, times user code, and
annotates an exception from user code with the stage and where it ran.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from rlflow.flow.metrics import MetricsContext, reset_current, set_current
from rlflow.flow.sentinels import NOT_READY
from rlflow.flow.waiting import Waiter

_perf = time.perf_counter


@dataclass
class BuildEnv:
    """What a chain is built with: its context, how it may block, and where it runs."""

    ctx: MetricsContext
    timeout: float | None
    waiter: Waiter
    where: str


def fn_name(fn: Any) -> str:
    """A short readable name of a user function (for labels and errors)."""
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return str(name).split(".<locals>.")[-1]


def annotate(err: BaseException, label: str, env: BuildEnv) -> None:
    """Add a note naming the stage and where it ran (once per stage)."""
    note = f"rlflow: raised in stage {label!r} ({env.where})"
    notes = getattr(err, "__notes__", ())
    if note not in notes:
        err.add_note(note)


def stop_iteration_error(label: str, env: BuildEnv) -> RuntimeError:
    """The error that replaces a ``StopIteration`` leaking out of user code."""
    return RuntimeError(
        f"StopIteration was raised inside the user function of stage {label!r} ({env.where}); "
        "it is treated as an error, never as the end of the stream. Return a value, or let the "
        "source end instead."
    )


def call_user(fn: Callable[..., Any], item: Any, label: str, env: BuildEnv) -> Any:
    """Call ``fn(item)`` with the plan's context current; annotate what it raises."""
    token = set_current(env.ctx)
    try:
        return fn(item)
    except StopIteration as err:
        raise stop_iteration_error(label, env) from err
    except Exception as err:
        annotate(err, label, env)
        raise
    finally:
        reset_current(token)


class ForEach:
    """``for_each(fn)``: ``fn(item)`` for each item; re-calls ``fn`` while it gives NOT_READY."""

    def __init__(self, fn: Callable[[Any], Any], label: str) -> None:
        self.fn = fn
        self.label = label

    def __call__(self, upstream: Iterator[Any], env: BuildEnv) -> Iterator[Any]:
        if hasattr(self.fn, "_on_fetch_start"):
            return self._with_fetch_hook(upstream, env)
        return self._plain(upstream, env)

    def _plain(self, upstream: Iterator[Any], env: BuildEnv) -> Iterator[Any]:
        fn, label, ctx = self.fn, self.label, env.ctx
        stats = ctx.stage(label)
        for item in upstream:
            if item is NOT_READY:
                yield item
                continue
            # call_user() inlined: this loop is the hottest path of every plan.
            token = set_current(ctx)
            start = _perf()
            try:
                result = fn(item)
            except StopIteration as err:
                raise stop_iteration_error(label, env) from err
            except Exception as err:
                annotate(err, label, env)
                raise
            finally:
                reset_current(token)
            stats.fn_time_s += _perf() - start
            while result is NOT_READY:
                env.waiter.poll()
                yield NOT_READY
                result = call_user(fn, item, label, env)
            stats.items += 1
            yield result

    def _with_fetch_hook(self, upstream: Iterator[Any], env: BuildEnv) -> Iterator[Any]:
        hook = self.fn._on_fetch_start  # type: ignore[attr-defined]
        return self._plain(_hooked(upstream, hook, self.label, env), env)


def _hooked(
    upstream: Iterator[Any], hook: Callable[[], Any], label: str, env: BuildEnv
) -> Iterator[Any]:
    # Calls the hook before fetching each new upstream item (not before re-fetches after
    # NOT_READY), with the plan's context current.
    fresh = True
    while True:
        if fresh:
            call_user(lambda _: hook(), None, label, env)
        try:
            item = next(upstream)
        except StopIteration:
            return
        fresh = item is not NOT_READY
        yield item


class Filter:
    """``filter(fn)``: keep items for which ``fn(item)`` is truthy."""

    def __init__(self, fn: Callable[[Any], Any], label: str) -> None:
        self.fn = fn
        self.label = label

    def __call__(self, upstream: Iterator[Any], env: BuildEnv) -> Iterator[Any]:
        fn, label, ctx = self.fn, self.label, env.ctx
        stats = ctx.stage(label)
        for item in upstream:
            if item is NOT_READY:
                yield item
                continue
            start = _perf()
            keep = call_user(fn, item, label, env)
            stats.fn_time_s += _perf() - start
            if keep:
                stats.items += 1
                yield item


class Combine:
    """``combine(fn)``: flat-map; ``fn(item)`` returns a list (or iterable) of outputs."""

    def __init__(self, fn: Callable[[Any], Iterable[Any]], label: str) -> None:
        self.fn = fn
        self.label = label

    def __call__(self, upstream: Iterator[Any], env: BuildEnv) -> Iterator[Any]:
        inner = ForEach(self.fn, self.label)(upstream, env)
        stats = env.ctx.stage(self.label)
        for result in inner:
            if result is NOT_READY:
                yield result
                continue
            stats.items -= 1  # ForEach counted the input; count outputs instead
            for out in result:
                stats.items += 1
                yield out


class Batch:
    """``batch(n)``: lists of ``n`` consecutive items; a shorter last list when the input ends."""

    def __init__(self, n: int, label: str) -> None:
        self.n = n
        self.label = label

    def __call__(self, upstream: Iterator[Any], env: BuildEnv) -> Iterator[Any]:
        n = self.n
        stats = env.ctx.stage(self.label)
        buf: list[Any] = []
        for item in upstream:
            if item is NOT_READY:
                yield item
                continue
            buf.append(item)
            if len(buf) >= n:
                stats.items += 1
                yield buf
                buf = []
        if buf:
            stats.items += 1
            yield buf


class Flatten:
    """``flatten()``: each item is a list (or iterable); yield its elements in order."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __call__(self, upstream: Iterator[Any], env: BuildEnv) -> Iterator[Any]:
        stats = env.ctx.stage(self.label)
        for item in upstream:
            if item is NOT_READY:
                yield item
                continue
            for out in item:
                stats.items += 1
                yield out


class Shuffle:
    """``shuffle(size, seed)``: reservoir shuffle with a buffer of ``size`` items."""

    def __init__(self, size: int, seed: int | None, label: str) -> None:
        self.size = size
        self.seed = seed
        self.label = label

    def __call__(self, upstream: Iterator[Any], env: BuildEnv) -> Iterator[Any]:
        rng = random.Random(self.seed)
        size = self.size
        buf: list[Any] = []
        for item in upstream:
            if item is NOT_READY:
                yield item
                continue
            buf.append(item)
            if len(buf) >= size:
                yield buf.pop(rng.randrange(len(buf)))
        while buf:
            yield buf.pop(rng.randrange(len(buf)))


class Transform:
    """``transform(fn)``: ``fn(iterator) -> iterator``, built once per chain.

    ``fn`` sees ``NOT_READY`` items and must pass them through. Each step of the iterator it
    returns runs with the plan's context current.
    """

    def __init__(self, fn: Callable[[Iterator[Any]], Iterable[Any]], label: str) -> None:
        self.fn = fn
        self.label = label

    def __call__(self, upstream: Iterator[Any], env: BuildEnv) -> Iterator[Any]:
        label, ctx = self.label, env.ctx
        stats = ctx.stage(label)
        produced = iter(call_user(self.fn, upstream, label, env))
        while True:
            token = set_current(ctx)
            start = _perf()
            try:
                item = next(produced)
            except StopIteration:
                return
            except Exception as err:
                annotate(err, label, env)
                raise
            finally:
                reset_current(token)
            stats.fn_time_s += _perf() - start
            if item is not NOT_READY:
                stats.items += 1
            yield item

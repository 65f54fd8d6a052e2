"""`HostStaging`: a batch's columns to an accelerator in one copy, through reused pinned memory.

Copying each column of a train batch on its own costs a pinned allocation and a transfer per
column (the V-trace learner spent 21 ms of 140 in ``pin_memory`` alone at batch 2048). A
`HostStaging` packs every column of a batch, as bytes at aligned offsets, into one pinned host
buffer that it keeps and reuses, starts one non-blocking copy of the whole buffer to the device,
and hands out each column as a typed view of the device copy: one allocation the first time,
then one memcpy per column on the host and one transfer.

Two buffers are used in turn (so one can be filled while the other's copy is in flight); before
a buffer is filled again, the copy that last read it is waited for (a CUDA event), so a batch is
never overwritten while it is still being sent. The buffers grow to the largest batch seen (to
the next power of two). On CPU (``pin=False``) the same packing runs without pinning: that is
how the tests check it.

Filling the buffer is a host memcpy (about 65 MB for 2048 Pong rows): with ``copy_threads`` > 1
a large column is cut into that many pieces, copied by a small thread pool at once (torch's copy
lets go of the GIL), which on an H200 machine's host went faster than one thread.

A `StagedBatch` is a batch a policy sent ahead of time (`rlflow.learner.PolicyUpdate.stage`, on a
side CUDA stream), which the learner thread uses to copy the next batch while the current one
trains.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from rlflow.data.sample_batch import SampleBatch

__all__ = ["HostStaging", "StagedBatch"]

_ALIGN = 64
"""Column offsets in the buffer are multiples of this many bytes (any dtype's alignment)."""
_MIN_PIECE = 4 << 20
"""Bytes below which a column is not cut into pieces for ``copy_threads``."""


class _Buffer:
    """One host buffer and the event of the last copy that read it."""

    __slots__ = ("host", "ready")

    def __init__(self) -> None:
        self.host: torch.Tensor | None = None
        self.ready: Any = None  # a torch.cuda.Event once a copy to CUDA was started from it


class HostStaging:
    """Sends a batch's numpy columns to ``device`` through one reused host buffer, one copy.

    Args:
        device: where the tensors go.
        pin: page-lock the host buffers (default: when ``device`` is a CUDA device; pinned
            memory is what lets the copy run asynchronously).
        copy_threads: threads that fill the host buffer, each a piece of a large column
            (default: 4 when pinned, at most the machine's cores; else 1, no pool).

    Example:
        >>> staging = HostStaging(torch.device("cpu"))
        >>> out = staging.to_device({"obs": np.arange(6, dtype=np.uint8).reshape(3, 2),
        ...                          "r": np.array([0.5, 1.0, 2.0], dtype=np.float32)})
        >>> out["obs"].dtype, out["obs"].tolist(), out["r"].tolist()
        (torch.uint8, [[0, 1], [2, 3], [4, 5]], [0.5, 1.0, 2.0])
    """

    def __init__(
        self, device: torch.device, *, pin: bool | None = None, copy_threads: int | None = None
    ) -> None:
        """Keep the device; the buffers are allocated on the first batch."""
        self.device = torch.device(device)
        self.pin = self.device.type == "cuda" if pin is None else bool(pin)
        """Whether the host buffers are pinned."""
        if copy_threads is None:
            copy_threads = min(4, os.cpu_count() or 1) if self.pin else 1
        if not isinstance(copy_threads, int) or copy_threads < 1:
            raise ValueError(f"HostStaging: copy_threads={copy_threads!r} must be an int >= 1")
        self.copy_threads = copy_threads
        """Threads filling the host buffer (1: the caller's thread alone)."""
        self._pool = (
            ThreadPoolExecutor(copy_threads, thread_name_prefix="rlflow-staging")
            if copy_threads > 1
            else None
        )
        self._buffers = (_Buffer(), _Buffer())
        self._turn = 0
        self._lock = threading.Lock()

    @property
    def capacity_bytes(self) -> int:
        """Bytes held by the host buffers."""
        return sum(0 if b.host is None else b.host.numel() for b in self._buffers)

    def _buffer(self, nbytes: int) -> _Buffer:
        """The next buffer in turn, at least ``nbytes`` long, once no copy reads it."""
        buf = self._buffers[self._turn]
        self._turn = 1 - self._turn
        if buf.ready is not None:
            buf.ready.synchronize()  # the last copy out of it has finished
            buf.ready = None
        if buf.host is None or buf.host.numel() < nbytes:
            size = 1 << max(nbytes - 1, 1).bit_length()
            buf.host = torch.empty(size, dtype=torch.uint8, pin_memory=self.pin)
        return buf

    def _pieces(
        self, host: torch.Tensor, start: int, raw: torch.Tensor
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(destination, source)`` pairs that copy ``raw`` to ``host[start:]``: one pair, or
        ``copy_threads`` for a column of at least ``copy_threads`` times `_MIN_PIECE` bytes."""
        n = raw.numel()
        parts = self.copy_threads if n >= self.copy_threads * _MIN_PIECE else 1
        step = max(-(-n // parts), 1)
        return [
            (host[start + i : start + min(i + step, n)], raw[i : min(i + step, n)])
            for i in range(0, n, step)
        ]

    def to_device(self, columns: Mapping[str, npt.NDArray[Any]]) -> dict[str, torch.Tensor]:
        """The columns as tensors on the device, their dtypes and shapes kept (bool, ints,
        floats; uint8 observations stay uint8), copied there in one non-blocking transfer."""
        arrays = {name: np.ascontiguousarray(column) for name, column in columns.items()}
        offsets: dict[str, int] = {}
        end = 0
        for name, array in arrays.items():
            offsets[name] = end
            end += -(-array.nbytes // _ALIGN) * _ALIGN
        with self._lock:  # the learner and its loader thread may both stage
            buffer = self._buffer(end)
            host = buffer.host
            assert host is not None
            pieces = []
            for name, array in arrays.items():
                raw = array.reshape(-1).view(np.uint8)
                if not raw.flags.writeable:  # torch takes only writable memory; numpy copies
                    raw = raw.copy()
                pieces += self._pieces(host, offsets[name], torch.from_numpy(raw))
            if self._pool is None or len(pieces) <= len(arrays):
                for dst, src in pieces:
                    dst.copy_(src)
            else:  # torch's copy lets go of the GIL: the pieces are copied at once
                for _ in self._pool.map(lambda piece: piece[0].copy_(piece[1]), pieces):
                    pass
            sent = host[:end].to(self.device, non_blocking=self.pin)
            if self.pin and self.device.type == "cuda":
                buffer.ready = torch.cuda.Event()  # type: ignore[no-untyped-call]
                buffer.ready.record(torch.cuda.current_stream(self.device))
            elif sent.data_ptr() == host.data_ptr():
                sent = sent.clone()  # on CPU ``to`` returns the buffer itself, which is reused
        out: dict[str, torch.Tensor] = {}
        for name, array in arrays.items():
            start = offsets[name]
            dtype = torch.from_numpy(np.empty(0, dtype=array.dtype)).dtype
            out[name] = sent[start : start + array.nbytes].view(dtype).reshape(array.shape)
        return out


class StagedBatch(SampleBatch):
    """A `SampleBatch` whose tensors a policy already sent to its device (`PolicyUpdate.stage`):
    the learner thread's prefetch of the next batch while the current one trains.

    The columns stay as they were (it is a `SampleBatch` everywhere); ``policy.batch_to_tensors``
    of the policy that staged it returns the staged tensors (waiting for their copy first), any
    other policy converts the columns itself. Slices and copies are plain batches.
    """

    def __init__(
        self,
        batch: SampleBatch,
        tensors: dict[str, torch.Tensor],
        *,
        owner: object,
        ready: Any = None,
    ) -> None:
        """Wrap ``batch`` (its arrays, not copied) with ``owner``'s ``tensors``; ``ready`` is
        the CUDA event their copy records (None: usable at once)."""
        super().__init__(batch)
        self.tensors = tensors
        """The staged tensors, on the owner's device."""
        self.owner = owner
        """The policy that staged them."""
        self.ready = ready
        """The event after which the tensors are complete on the device (None: now)."""

    def tensors_for(self, policy: object, device: torch.device) -> dict[str, torch.Tensor] | None:
        """The staged tensors when ``policy`` staged them, made safe to use on ``device``'s
        current stream; else None."""
        if policy is not self.owner:
            return None
        if self.ready is not None:
            stream = torch.cuda.current_stream(device)
            stream.wait_event(self.ready)
            for tensor in self.tensors.values():
                tensor.record_stream(stream)  # the copy stream allocated them
        return self.tensors

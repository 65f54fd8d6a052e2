"""`DataParallel`: one learner's place in a group of data-parallel learners.

With ``num_learners = N`` (`rlflow.workers.learner_group.LearnerGroup`) every learner holds the
same policies and receives the same batch. Each optimizer step (a whole batch, or one
minibatch of an SGD epoch) is split into N contiguous shards, one per learner (a sequence
batch is cut at sequence ends: `PolicyUpdate.shard`); each learner computes
the gradient of its shard's mean loss, and one all-reduce over a ``torch.distributed`` process
group (gloo on CPU, NCCL on CUDA) makes every learner hold the weighted mean

    g = sum_k w_k * g_k,   w_k = (the shard's rows) / (the step's rows),

which is the gradient of the mean loss over the whole step: the same number a single learner
computes on the whole batch (to float32 rounding), so every learner takes the same clipped
step and their weights stay equal. The loss travels in the same all-reduce, so a NaN on one
learner makes every learner skip the update together (`PolicyUpdate.apply_update`).

With ``own_batches`` (DD-PPO, `rlflow.algorithms.ddppo`: the rollout workers are the learners)
every rank learns on a batch of its own instead: nothing is split, rank ``k``'s gradient of
its minibatch's mean loss gets the weight ``w_k = n_k / sum_j n_j`` of its batch's ``n_k`` env
steps among all ranks' (:meth:`DataParallel.batch_share`), and every rank cuts its batch into
the same number of minibatches per epoch (:meth:`DataParallel.agree_minibatches`), so the
ranks meet in the same number of all-reduces even when their batches differ in size (a
preempted straggler's shorter batch). The weights are equal on every rank after every step
for the same reason as above.

The process group is built from a ``torch.distributed`` store the group gives (a ``TCPStore``
on the driver for Ray actors, a ``HashStore`` for learners that are threads of one process:
`serve_store`, `open_store`), under a prefix per generation: after a learner is restarted every
learner joins a fresh group.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from rlflow.checks import check_int

__all__ = ["DataParallel", "open_store", "serve_store", "shard_bounds"]


def shard_bounds(count: int, rank: int, world_size: int) -> tuple[int, int]:
    """Rows ``[start, end)`` of shard ``rank`` when ``count`` rows are cut into ``world_size``
    contiguous shards whose sizes differ by at most one (a shard may be empty when
    ``count < world_size``).

    >>> [shard_bounds(10, k, 3) for k in range(3)]
    [(0, 3), (3, 6), (6, 10)]
    """
    return count * rank // world_size, count * (rank + 1) // world_size


def serve_store(host: str | None, timeout_s: float) -> tuple[Any, Any]:
    """A ``torch.distributed`` store for a group, kept by its owner (the driver), and what its
    members pass to `open_store` to reach it: with ``host`` None a ``HashStore`` for members
    that are threads of this process (the spec is the store itself), else a ``TCPStore``
    server on ``host`` at a free port (the spec ``("tcp", host, port)``). Keep the store
    alive while the group works: the members talk through it."""
    if host is None:
        from torch.distributed import HashStore  # type: ignore[attr-defined]

        store = HashStore()
        return store, store
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    timeout = datetime.timedelta(seconds=timeout_s)
    server = TCPStore(host, 0, None, True, timeout, wait_for_workers=False)
    return server, ("tcp", host, server.port)


def open_store(spec: Any, timeout_s: float) -> Any:
    """The store of a `serve_store` spec: an in-process store itself, or a client of the
    ``TCPStore`` at ``("tcp", host, port)``."""
    if not isinstance(spec, tuple):
        return spec
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    _, host, port = spec
    return TCPStore(host, int(port), None, False, datetime.timedelta(seconds=timeout_s))


class DataParallel:
    """A learner's rank in a group of ``world_size`` and the process group joining them.

    Args:
        rank: this learner's index, 0..world_size-1 (learner 0 publishes the weights).
        world_size: how many learners, >= 1.
        store: a ``torch.distributed.Store`` every learner of the group reaches.
        generation: which incarnation of the group (a new one after a restart); process groups
            of different generations never see each other's messages.
        device: where the policy's gradients live (``cuda``: NCCL, else gloo).
        shared_device: several learners share the device (fractional ``num_gpus_per_learner``):
            NCCL takes one rank per GPU, so they all-reduce over gloo, through host memory.
        timeout_s: how long a collective waits for the other learners before it raises.
        own_batches: every rank learns on a batch of its own (DD-PPO; module docstring): steps
            are not split, each rank's gradient is weighted by its batch's share of the steps.
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        store: Any,
        *,
        generation: int = 0,
        device: torch.device | None = None,
        shared_device: bool = False,
        timeout_s: float = 120.0,
        own_batches: bool = False,
    ) -> None:
        """Join the process group (blocks until every learner of ``world_size`` joined)."""
        import torch.distributed as dist

        self.world_size = check_int(world_size, "DataParallel: world_size", low=1)
        self.rank = check_int(rank, "DataParallel: rank", low=0, high=world_size - 1)
        self.generation = generation
        self.own_batches = own_batches
        """Whether each rank learns on its own batch (DD-PPO) instead of a shard of one."""
        prefixed = dist.PrefixStore(  # type: ignore[attr-defined]
            f"rlflow-learners/{generation}", store
        )
        timeout = datetime.timedelta(seconds=timeout_s)
        on_gpu = device is not None and device.type == "cuda"
        self.backend = "nccl" if on_gpu and not shared_device else "gloo"
        """``"nccl"`` for a CUDA device of this learner's own, else ``"gloo"``."""
        self._collective_device = device if self.backend == "nccl" else torch.device("cpu")
        if self.backend == "nccl":
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            self.process_group: Any = dist.ProcessGroupNCCL(prefixed, rank, world_size, options)
        else:
            self.process_group = dist.ProcessGroupGloo(prefixed, rank, world_size, timeout)

    def bounds(self, count: int) -> tuple[int, int]:
        """This learner's rows ``[start, end)`` of a step of ``count`` rows (`shard_bounds`)."""
        return shard_bounds(count, self.rank, self.world_size)

    def share(self, count: int) -> tuple[int, int, float]:
        """`bounds` and their share of the ``count`` rows (0.0 for an empty step)."""
        start, end = self.bounds(count)
        return start, end, (end - start) / count if count else 0.0

    def share_runs(self, sizes: Sequence[int] | npt.NDArray[Any]) -> tuple[int, int, float]:
        """This learner's run ``[first, end)`` of whole items (sequences) of ``sizes``,
        contiguous shards by count (`bounds`), and its share of their total size: the weight
        of a loss that is a mean over the items' rows or steps (0.0 when empty)."""
        first, end = self.bounds(len(sizes))
        total = int(np.sum(sizes))
        return first, end, int(np.sum(sizes[first:end])) / total if total else 0.0

    def all_reduce_mean(self, tensors: Sequence[torch.Tensor], weight: float) -> list[torch.Tensor]:
        """``sum over learners of weight_k * tensor_k`` for each tensor (one flat all-reduce;
        the weights of a step sum to 1 over the learners, so this is their weighted mean).
        Every learner calls it with tensors of the same shapes, in the same order."""
        if not tensors:
            return []
        flat = torch.cat([t.detach().reshape(-1).to(torch.float32) for t in tensors])
        flat.mul_(float(weight))
        device = flat.device
        flat = flat.to(self._collective_device)  # gloo: through host memory
        self.process_group.allreduce([flat]).wait()
        flat = flat.to(device)
        out: list[torch.Tensor] = []
        offset = 0
        for t in tensors:
            out.append(flat[offset : offset + t.numel()].view(t.shape).to(t.dtype))
            offset += t.numel()
        return out

    def all_min(self, values: Sequence[int]) -> list[int]:
        """The element-wise minimum of ``values`` over the learners (one small all-reduce):
        what every learner has, e.g. which parts of a batch every learner could fetch."""
        return self._all_reduce_ints(values, "MIN")

    def all_max(self, values: Sequence[int]) -> list[int]:
        """The element-wise maximum of ``values`` over the learners (one small all-reduce)."""
        return self._all_reduce_ints(values, "MAX")

    def all_sum(self, values: Sequence[int]) -> list[int]:
        """The element-wise sum of ``values`` over the learners (one small all-reduce)."""
        return self._all_reduce_ints(values, "SUM")

    def _all_reduce_ints(self, values: Sequence[int], op: str) -> list[int]:
        import torch.distributed as dist

        if not values:
            return []
        # float64 holds every int below 2**53 exactly (env-step counts)
        tensor = torch.tensor([float(v) for v in values], dtype=torch.float64)
        tensor = tensor.to(self._collective_device)
        options = dist.AllreduceOptions()
        options.reduceOp = getattr(dist.ReduceOp, op)
        self.process_group.allreduce([tensor], options).wait()
        return [int(v) for v in tensor.cpu().tolist()]

    def batch_share(self, steps: int) -> float:
        """``own_batches``: this rank's ``steps`` over the sum of every rank's (one
        all-reduce; every rank calls it once per batch): the weight of its gradients."""
        (total,) = self.all_sum([steps])
        return steps / total if total else 0.0

    def agree_minibatches(self, steps: int, size: int) -> int:
        """``own_batches``: the minibatches per epoch every rank cuts its batch of ``steps``
        into: the most any rank's batch holds at ``size`` steps each (at least 1; one
        all-reduce), so a rank with a shorter batch takes as many, smaller, steps."""
        (most,) = self.all_max([max(1, steps // size)])
        return most

    def __repr__(self) -> str:
        return (
            f"DataParallel(rank={self.rank}, world_size={self.world_size}, "
            f"backend={self.backend!r}, generation={self.generation}"
            f"{', own_batches=True' if self.own_batches else ''})"
        )

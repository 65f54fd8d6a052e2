"""Batches by reference: what the driver moves when learner actors train (``num_learners``).

A rollout worker stores each batch it samples in its own object store (`store_batch`, a shard
transform run on the worker) and the driver receives a `BatchRef`: the reference and the row and
step counts its operators count with. `rlflow.ops.ConcatBatches` gathers refs into one
`BatchRefs` (a train batch of several fragments); the learner actors fetch the fragments and
concatenate them (`BatchRefs.resolve`), so sampled data goes from the workers to the learners
and the driver handles references and counts only (the issue's "driver off the data path").

    >>> from rlflow import flow
    >>> flow.init(backend="local")
    >>> parts = [SampleBatch({"x": [1, 2]}), SampleBatch({"x": [3]})]
    >>> refs = BatchRefs([store_batch(b) for b in parts])
    >>> refs.env_steps(), refs.resolve()["x"].tolist()
    (3, [1, 2, 3])
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rlflow import flow
from rlflow.data.sample_batch import MultiAgentBatch, SampleBatch

__all__ = ["BatchRef", "BatchRefs", "store_batch"]

Batch = SampleBatch | MultiAgentBatch


@dataclass(frozen=True, slots=True)
class BatchRef:
    """One batch in the object store of the process that stored it, and its sizes."""

    ref: Any
    """The object reference (``flow.put``); the batch lives while a reference to it does."""
    count: int
    """Rows (``SampleBatch.count``; env steps for a `MultiAgentBatch`)."""
    num_env_steps: int
    """``batch.env_steps()``."""
    num_agent_steps: int
    """``batch.agent_steps()``."""

    def env_steps(self) -> int:
        """Env steps of the batch, as ``SampleBatch.env_steps()``."""
        return self.num_env_steps

    def agent_steps(self) -> int:
        """Agent steps of the batch, as ``SampleBatch.agent_steps()``."""
        return self.num_agent_steps

    def resolve(self) -> Batch:
        """The batch itself (fetched from where it is stored)."""
        batch: Batch = flow.get(self.ref)
        return batch


def store_batch(batch: Batch) -> BatchRef:
    """Store ``batch`` once (``flow.put``: on a rollout actor, in its node's object store,
    owned by it) and return its `BatchRef`."""
    count = batch.count if isinstance(batch, SampleBatch) else batch.env_steps()
    return BatchRef(flow.put(batch), count, batch.env_steps(), batch.agent_steps())


class BatchRefs:
    """Several `BatchRef` that make one train batch, in order; what `ConcatBatches` emits for
    refs and the learner actors receive (`rlflow.workers.learner_group`)."""

    __slots__ = ("parts",)

    def __init__(self, parts: Iterable[BatchRef]) -> None:
        """Keep the parts in order."""
        self.parts: tuple[BatchRef, ...] = tuple(parts)

    @property
    def count(self) -> int:
        """Rows in all parts."""
        return sum(p.count for p in self.parts)

    def env_steps(self) -> int:
        """Env steps in all parts."""
        return sum(p.num_env_steps for p in self.parts)

    def agent_steps(self) -> int:
        """Agent steps in all parts."""
        return sum(p.num_agent_steps for p in self.parts)

    def resolve(self) -> Batch:
        """Fetch every part (one ``get`` for all) and concatenate them in order."""
        batches: list[Batch] = flow.get([p.ref for p in self.parts])
        return batches[0] if len(batches) == 1 else SampleBatch.concat_samples(batches)

    def __repr__(self) -> str:
        return f"BatchRefs({len(self.parts)} parts, {self.env_steps()} env steps)"

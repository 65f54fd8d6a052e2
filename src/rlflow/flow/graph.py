"""The operator graph of a plan, for ``describe()``: nodes, edges, and Mermaid rendering."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

_ids = itertools.count(1)


@dataclass(frozen=True, eq=False)
class PlanNode:
    """One operator of a plan.

    Attributes:
        op: the operator's name (``for_each``, ``gather_async``, ``union``, ...).
        label: what to show: the operator with its argument (``for_each(train_step)``).
        kind: ``source``, ``shard_stage`` (runs on the shard actors), ``gather``, ``stage``
            (runs where the local iterator is read), ``union`` or ``duplicate``.
        inputs: the nodes this one reads from.
        id: unique number, in creation order.
    """

    op: str
    label: str
    kind: str
    inputs: tuple[PlanNode, ...] = ()
    id: int = field(default_factory=lambda: next(_ids))

    @property
    def key(self) -> str:
        """A unique, readable key: the label and the id (used for per-stage statistics)."""
        return f"{self.label}#{self.id}"


class PlanEdge(NamedTuple):
    """Items flow from node ``src`` to node ``dst`` (ids)."""

    src: int
    dst: int


@dataclass(frozen=True)
class PlanGraph:
    """The operator graph that ends at one iterator: nodes in creation order, and edges."""

    nodes: tuple[PlanNode, ...]
    edges: tuple[PlanEdge, ...]

    @classmethod
    def ending_at(cls, last: PlanNode) -> PlanGraph:
        """Collect every node ``last`` reads from, directly or not."""
        seen: dict[int, PlanNode] = {}
        stack = [last]
        while stack:
            node = stack.pop()
            if node.id in seen:
                continue
            seen[node.id] = node
            stack.extend(node.inputs)
        nodes = tuple(sorted(seen.values(), key=lambda n: n.id))
        edges = tuple(PlanEdge(src.id, n.id) for n in nodes for src in n.inputs)
        return cls(nodes, edges)

    def to_mermaid(self) -> str:
        """Mermaid ``flowchart`` text; shard-side stages are grouped apart from local ones."""
        shapes = {
            "source": ('[("', '")]'),
            "union": ('{{"', '"}}'),
            "duplicate": ('[/"', '"/]'),
            "gather": ('[["', '"]]'),
        }
        lines = ["flowchart TD"]
        for node in self.nodes:
            left, right = shapes.get(node.kind, ('["', '"]'))
            text = node.label.replace('"', "'")
            lines.append(f"    n{node.id}{left}{text}{right}")
        lines.extend(f"    n{edge.src} --> n{edge.dst}" for edge in self.edges)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_mermaid()

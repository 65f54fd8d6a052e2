"""The operator graph of a plan, for ``describe()``: nodes, edges, and Mermaid rendering."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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

    def renumbered(self) -> PlanGraph:
        """The same graph with its nodes numbered 1, 2, ... in creation order.

        Node ids are unique in the process (a counter), so the same plan built after others
        (in a notebook, a Tune worker, a restore) gets other ids; numbered by position, its
        keys (``label#position``) are the same wherever and whenever it is built.
        """
        built: dict[int, PlanNode] = {}
        for position, node in enumerate(self.nodes, 1):
            inputs = tuple(built[i.id] for i in node.inputs)
            built[node.id] = PlanNode(node.op, node.label, node.kind, inputs, position)
        nodes = tuple(built.values())
        return PlanGraph(nodes, tuple(PlanEdge(src.id, n.id) for n in nodes for src in n.inputs))

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

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form: ``{"nodes": [{id, op, label, kind, key, inputs}], "edges":
        [[src, dst]]}``; `from_dict` reads it back with the same ids and keys."""
        nodes = [
            {
                "id": n.id,
                "op": n.op,
                "label": n.label,
                "kind": n.kind,
                "key": n.key,
                "inputs": [i.id for i in n.inputs],
            }
            for n in self.nodes
        ]
        return {"nodes": nodes, "edges": [list(e) for e in self.edges]}

    @classmethod
    def from_dict(cls, data: Any) -> PlanGraph:
        """The graph `to_dict` wrote (ids kept, so node keys match the saved stage keys).

        Raises ``ValueError`` naming what is missing or wrong.
        """
        try:
            built: dict[int, PlanNode] = {}
            for raw in sorted(data["nodes"], key=lambda n: int(n["id"])):
                inputs = tuple(built[int(i)] for i in raw["inputs"])
                node = PlanNode(
                    str(raw["op"]), str(raw["label"]), str(raw["kind"]), inputs, int(raw["id"])
                )
                built[node.id] = node
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"PlanGraph.from_dict: not a saved plan graph ({err!r})") from None
        nodes = tuple(built.values())
        edges = tuple(PlanEdge(src.id, n.id) for n in nodes for src in n.inputs)
        return cls(nodes, edges)

    def __str__(self) -> str:
        return self.to_mermaid()

"""A plan describes itself: operator graph and Mermaid text."""

from __future__ import annotations

import pytest

from rlflow import flow

pytestmark = pytest.mark.timeout(60)


def test_describe_lists_nodes_edges_unions_and_duplicates(local_backend: None) -> None:
    rollouts = flow.from_range(8, num_shards=2).for_each(lambda x: x).gather_async()
    left, right = rollouts.duplicate(2)
    plan = left.filter(bool).union(right.batch(2), deterministic=True).for_each(str)
    graph = plan.describe()
    labels = [n.label for n in graph.nodes]
    assert labels == [
        "from_range[8, shards=2]",
        "for_each(<lambda>)",
        "gather_async(num_async=1)",
        "duplicate[0/2]",
        "duplicate[1/2]",
        "filter(bool)",
        "batch(2)",
        "union(deterministic)",
        "for_each(str)",
    ]
    kinds = {n.label: n.kind for n in graph.nodes}
    assert kinds["for_each(<lambda>)"] == "shard_stage"
    assert kinds["union(deterministic)"] == "union"
    ids = {n.label: n.id for n in graph.nodes}
    assert (ids["filter(bool)"], ids["union(deterministic)"]) in graph.edges
    assert (ids["batch(2)"], ids["union(deterministic)"]) in graph.edges
    assert (ids["gather_async(num_async=1)"], ids["duplicate[1/2]"]) in graph.edges
    assert len(graph.edges) == 9

    text = graph.to_mermaid()
    assert text.splitlines()[0] == "flowchart TD"
    assert f'n{ids["union(deterministic)"]}{{{{"union(deterministic)"}}}}' in text
    assert f"n{ids['batch(2)']} --> n{ids['union(deterministic)']}" in text
    out = plan.take(100)
    assert len(out) == 7 + 4  # 7 truthy items on the left, 4 pairs on the right
    assert sorted(x for x in out if not x.startswith("[")) == [str(x) for x in range(1, 8)]


def test_a_plan_built_later_has_the_same_positional_keys(local_backend: None) -> None:
    def build() -> flow.PlanGraph:
        it = flow.from_range(6, num_shards=2).for_each(lambda x: x + 1).gather_sync()
        return it.batch(2).describe()

    first, later = build(), build()
    assert [n.key for n in first.nodes] != [n.key for n in later.nodes]  # process-wide ids
    stable = first.renumbered()
    assert [n.key for n in later.renumbered().nodes] == [n.key for n in stable.nodes]
    assert [n.id for n in stable.nodes] == list(range(1, len(stable.nodes) + 1))
    assert stable.to_mermaid() == later.renumbered().to_mermaid()
    assert [(n.op, n.label, n.kind) for n in stable.nodes] == [
        (n.op, n.label, n.kind) for n in first.nodes
    ]
    assert stable.edges == tuple(flow.PlanGraph.from_dict(stable.to_dict()).edges)

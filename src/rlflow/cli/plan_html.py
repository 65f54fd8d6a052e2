"""A run's plan as one self-contained HTML page: an inline SVG graph laid out here, no scripts.

Nodes are placed in layers (a node one layer below the deepest node it reads from; within a
layer in creation order), items flowing top-down. Each stage with statistics is tinted by its
share of time and shows its throughput (items/s) and share; the bottleneck (largest share) is
outlined in red. A table below lists every stage's numbers, then the learner thread's queue
statistics if the run had one. Nothing is fetched: the page opens offline.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from rlflow.cli.dataflow import RunDataflow, StageView
from rlflow.flow import PlanGraph, PlanNode

__all__ = ["layout", "plan_svg", "render_html", "write_html"]

_W, _H, _GAP_X, _GAP_Y, _MARGIN = 320, 52, 40, 34, 10
_MAX_LABEL = 38

_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 20px; } p.meta { color: #555; }
table { border-collapse: collapse; margin-top: 16px; font-size: 13px; }
td, th { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; font-family: monospace; }
tr.bottleneck td { background: #fde2e1; font-weight: bold; }
svg text { font-family: sans-serif; }
div.view { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
"""


def layout(graph: PlanGraph) -> dict[int, tuple[float, float]]:
    """Node id -> (x, y) of its box's top-left corner, in pixels: a node one layer below the
    deepest node it reads from, then each node moved down to just above its nearest reader."""
    layer: dict[int, int] = {}
    for node in graph.nodes:  # creation order: inputs come first
        layer[node.id] = 1 + max((layer[i.id] for i in node.inputs), default=-1)
    readers: dict[int, list[int]] = {}
    for src, dst in graph.edges:
        readers.setdefault(src, []).append(dst)
    for node in reversed(graph.nodes):  # a branch sits right above the node that reads it
        if node.id in readers:
            layer[node.id] = min(layer[r] for r in readers[node.id]) - 1
    rows: dict[int, list[int]] = {}
    for node_id, depth in layer.items():
        rows.setdefault(depth, []).append(node_id)
    widest = max((len(r) for r in rows.values()), default=1)
    total = widest * _W + (widest - 1) * _GAP_X
    where: dict[int, tuple[float, float]] = {}
    for depth, ids in rows.items():
        row_w = len(ids) * _W + (len(ids) - 1) * _GAP_X
        x0 = _MARGIN + (total - row_w) / 2
        for i, node_id in enumerate(ids):
            where[node_id] = (x0 + i * (_W + _GAP_X), _MARGIN + depth * (_H + _GAP_Y))
    return where


def _tint(share: float) -> str:
    """White (no time) to orange (all the time)."""
    t = min(max(share, 0.0), 1.0)
    green, blue = round(255 - 120 * t), round(255 - 215 * t)
    return f"rgb(255,{green},{blue})"


def _untimed(node: PlanNode, *, measured: bool) -> str:
    """The second line of a node without numbers: its kind (and, in a measured run, why)."""
    where = "runs on the shard actors" if node.kind == "shard_stage" else node.kind
    return f"{where}: no statistics of its own" if measured else where


def _node_svg(
    node: PlanNode, x: float, y: float, stats: StageView | None, *, hot: bool, measured: bool
) -> str:
    label = node.label if len(node.label) <= _MAX_LABEL else node.label[: _MAX_LABEL - 1] + "…"
    if stats is None:
        fill, detail = "#eef2f7", _untimed(node, measured=measured)
    else:
        fill = _tint(stats.share)
        detail = f"{stats.items_per_s:.2f} items/s · {stats.share:.1%} of time"
    stroke, width = ("#d00", 3) if hot else ("#555", 1)
    title = escape(f"{node.key} ({node.kind})")
    tag = '<tspan fill="#d00" font-weight="bold"> bottleneck</tspan>' if hot else ""
    return (
        f'<g><title>{title}</title><rect x="{x:.0f}" y="{y:.0f}" width="{_W}" height="{_H}" '
        f'rx="8" fill="{fill}" stroke="{stroke}" stroke-width="{width}"/>'
        f'<text x="{x + 10:.0f}" y="{y + 20:.0f}" font-size="13">{escape(label)}</text>'
        f'<text x="{x + 10:.0f}" y="{y + 40:.0f}" font-size="12" fill="#333">'
        f"{escape(detail)}{tag}</text></g>"
    )


def plan_svg(flow: RunDataflow) -> str:
    """The plan graph as an inline SVG: boxes laid out by `layout`, arrows in the direction
    items flow; each measured stage tinted by its share of time, the bottleneck outlined."""
    where = layout(flow.graph)
    width = max((x for x, _ in where.values()), default=0) + _W + _MARGIN
    height = max((y for _, y in where.values()), default=0) + _H + _MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}"><defs><marker id="arrow" viewBox="0 0 10 10" '
        'refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>'
    ]
    for src, dst in flow.graph.edges:
        (x1, y1), (x2, y2) = where[src], where[dst]
        x1, y1, x2 = x1 + _W / 2, y1 + _H, x2 + _W / 2
        mid = (y1 + y2) / 2
        parts.append(
            f'<path d="M{x1:.0f},{y1:.0f} C{x1:.0f},{mid:.0f} {x2:.0f},{mid:.0f} {x2:.0f},'
            f'{y2:.0f}" fill="none" stroke="#555" stroke-width="1.5" marker-end="url(#arrow)"/>'
        )
    hot = flow.bottleneck
    for node in flow.graph.nodes:
        x, y = where[node.id]
        stats = flow.stages.get(node.key)
        parts.append(_node_svg(node, x, y, stats, hot=node.key == hot, measured=flow.measured))
    parts.append("</svg>")
    return "".join(parts)


def _table(flow: RunDataflow) -> str:
    head = (
        "<tr><th>stage</th><th>items</th><th>items/s</th><th>function s</th>"
        "<th>waiting s</th><th>share of time</th></tr>"
    )
    rows = [head]
    for node in flow.graph.nodes:
        s = flow.stages.get(node.key)
        name = escape(node.key)
        if s is None:
            detail = _untimed(node, measured=flow.measured)
            rows.append(f'<tr><td>{name}</td><td colspan="5">{detail}</td></tr>')
            continue
        cls = ' class="bottleneck"' if node.key == flow.bottleneck else ""
        rows.append(
            f"<tr{cls}><td>{name}</td><td>{s.items}</td><td>{s.items_per_s:.2f}</td>"
            f"<td>{s.fn_time_s:.3f}</td><td>{s.wait_time_s:.3f}</td><td>{s.share:.1%}</td></tr>"
        )
    return "<table>" + "".join(rows) + "</table>"


def _learner_table(flow: RunDataflow) -> str:
    if not flow.learner_thread:
        return ""
    rows = "".join(
        f"<tr><td>{escape(k)}</td><td>{v:g}</td></tr>" for k, v in flow.learner_thread.items()
    )
    return f"<h2>Learner thread</h2><table><tr><th>statistic</th><th>value</th></tr>{rows}</table>"


def render_html(flow: RunDataflow) -> str:
    """The whole page: a heading with the run, the graph, the stage table, the learner thread."""
    what = "measured dataflow" if flow.stages else "dataflow"
    title = escape(f"{flow.algorithm} on {flow.env or '?'}: {what}")
    steps = "" if flow.env_steps_per_s is None else f", {flow.env_steps_per_s:.1f} env steps/s"
    hot = escape(flow.bottleneck or "none measured")
    meta = (
        f"iterations {flow.first_iteration}..{flow.last_iteration}, {flow.elapsed_s:.2f} s"
        f"{steps}. Bottleneck: <b>{hot}</b>. Share of time: the stage's function plus its "
        "waiting on actors, over the wall time of these iterations."
        if flow.stages
        else "Not measured: the plan's graph alone (rlflow plan RUN_DIR draws a run's numbers)."
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f'<style>{_CSS}</style></head><body><h1>{title}</h1><p class="meta">{meta}</p>'
        f'<div class="view"><div>{plan_svg(flow)}</div><div>{_table(flow)}{_learner_table(flow)}'
        "</div></div></body></html>\n"
    )


def write_html(flow: RunDataflow, path: str | Path) -> Path:
    """Write `render_html` of ``flow`` to ``path`` (parent dirs created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(flow), encoding="utf-8")
    return out

"""The first nodes of an ONNX graph, laid out by depth and drawn, with the whole graph's op counts.

Drawn here rather than by an outside viewer so that a published page holds the picture itself: `svg` is a
self-contained SVG (jinja2, nothing to load, no outside address), `figure` the same layout as a matplotlib
figure for a notebook. Only the first `max_nodes` nodes are drawn, so a graph of any size gives a readable
picture; the graph is read without its external weights, which a drawing never needs.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import jinja2
import onnx

from .inventory import inventory, load

DEFAULT_MAX_NODES = 40


def layout(
    path: str | os.PathLike | onnx.ModelProto, max_nodes: int = DEFAULT_MAX_NODES
) -> tuple[list[tuple[str, str, int, int]], list[tuple[int, int]]]:
    """The first `max_nodes` nodes in graph (topological) order as (name, op_type, layer, slot), where
    layer is the longest path from a graph input, plus the edges (producer index, consumer index)."""
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
    nodes = list(load(path, weights=False).graph.node)[:max_nodes]
    producer: dict[str, int] = {}
    depth: list[int] = []
    edges: list[tuple[int, int]] = []
    for i, node in enumerate(nodes):
        parents = sorted({producer[x] for x in node.input if x in producer})
        edges.extend((p, i) for p in parents)
        depth.append(1 + max((depth[p] for p in parents), default=-1))
        producer.update({out: i for out in node.output})
    slots: dict[int, int] = {}
    placed = []
    for node, d in zip(nodes, depth):
        placed.append((node.name, node.op_type, d, slots.get(d, 0)))
        slots[d] = slots.get(d, 0) + 1
    return placed, edges


def figure(
    path: str | os.PathLike | onnx.ModelProto, *, max_nodes: int = DEFAULT_MAX_NODES, title: str | None = None
) -> Any:
    """A matplotlib view: op counts (left) and the first nodes as a layered graph."""
    import matplotlib.pyplot as plt

    model = load(path, weights=False)
    ops = inventory(model)
    placed, edges = layout(model, max_nodes)
    fig, (bars, graph) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 2]})
    names = list(ops)[::-1]
    bars.barh(names, [ops[n] for n in names], color="tab:blue")
    bars.set_xlabel("nodes")
    bars.set_title(f"{sum(ops.values())} nodes, {len(ops)} op types")
    for a, b in edges:
        (_, _, xa, ya), (_, _, xb, yb) = placed[a], placed[b]
        graph.plot([xa, xb], [-ya, -yb], color="0.6", lw=0.8, zorder=1)
    for _, op, x, y in placed:
        graph.text(
            x,
            -y,
            op,
            ha="center",
            va="center",
            fontsize=7,
            zorder=2,
            bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "tab:blue"},
        )
    layers = max((p[2] for p in placed), default=0)
    width = max((p[3] for p in placed), default=0)
    graph.set_xlim(-0.8, layers + 0.8)
    graph.set_ylim(-width - 0.8, 0.8)
    graph.axis("off")
    shown = len(placed)
    graph.set_title(f"first {shown} of {len(model.graph.node)} nodes, left to right by depth")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


_SVG = jinja2.Template(
    """<svg xmlns="http://www.w3.org/2000/svg" width="{{ width }}" height="{{ height }}" viewBox="0 0 {{ width }} {{ height }}" font-family="system-ui, sans-serif" font-size="11">
<title>{{ title }}</title>
<text x="8" y="16" font-size="13" font-weight="bold">{{ title }}</text>
<text x="8" y="34" fill="#444">{{ subtitle }}</text>
{% for e in edges %}
<path d="M{{ e.x1 }},{{ e.y1 }} C{{ e.cx }},{{ e.y1 }} {{ e.cx }},{{ e.y2 }} {{ e.x2 }},{{ e.y2 }}" fill="none" stroke="#999" stroke-width="1"/>
{% endfor %}
{% for n in nodes %}
<g><title>{{ n.name }} ({{ n.op }})</title><rect x="{{ n.x }}" y="{{ n.y }}" width="{{ box_w }}" height="{{ box_h }}" rx="5" fill="{{ n.fill }}" stroke="{{ n.stroke }}"/>
<text x="{{ n.x + box_w / 2 }}" y="{{ n.y + box_h / 2 + 4 }}" text-anchor="middle">{{ n.op }}</text></g>
{% endfor %}
</svg>""",
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)


def svg(
    path: str | os.PathLike | onnx.ModelProto,
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
    title: str | None = None,
    highlight: set[str] | frozenset[str] = frozenset(),
) -> str:
    """A self-contained SVG of the first `max_nodes` nodes, left to right by depth (ops in `highlight`, e.g.
    those the device gate refuses, drawn red), headed by the op counts of the whole graph."""
    model = load(path, weights=False)
    placed, edges = layout(model, max_nodes)
    counts = Counter(n.op_type for n in model.graph.node)
    box_w, box_h, gap_x, gap_y, top = 92, 22, 22, 10, 50
    pos = [(8 + d * (box_w + gap_x), top + s * (box_h + gap_y)) for _, _, d, s in placed]
    nodes = [
        {
            "name": name,
            "op": op,
            "x": x,
            "y": y,
            "fill": "#fde2e2" if op in highlight else "#eef4fb",
            "stroke": "#c0392b" if op in highlight else "#2c6fb7",
        }
        for (name, op, _, _), (x, y) in zip(placed, pos)
    ]
    lines = [
        {
            "x1": pos[a][0] + box_w,
            "y1": pos[a][1] + box_h / 2,
            "x2": pos[b][0],
            "y2": pos[b][1] + box_h / 2,
            "cx": (pos[a][0] + box_w + pos[b][0]) / 2,
        }
        for a, b in edges
    ]
    width = max((x for x, _ in pos), default=0) + box_w + 16
    height = max((y for _, y in pos), default=top) + box_h + 16
    ops = ", ".join(f"{op} {n}" for op, n in counts.most_common())
    subtitle = f"first {len(placed)} of {len(model.graph.node)} nodes; ops: {ops}"
    text = _SVG.render(
        width=max(width, 420),
        height=height,
        title=title or model.graph.name or "ONNX graph",
        subtitle=subtitle,
        nodes=nodes,
        edges=lines,
        box_w=box_w,
        box_h=box_h,
    )
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())

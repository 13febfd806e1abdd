"""Look at an exported ONNX graph: netron live in JupyterLab, a static picture in the published appendix.

A netron view is a localhost server; in the published HTML it would be a dead frame, so headless runs
(`report.headless()`) never start one and the notebook shows `figure(...)` instead: op counts next to a
layered drawing of the graph's first nodes, enough to see which ops the compiler will meet first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import onnx

from . import report

DEFAULT_MAX_NODES = 40


def _model(path: str | os.PathLike | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(path, onnx.ModelProto):
        return path
    if not Path(path).is_file():
        raise FileNotFoundError(f"path: no ONNX file at {str(path)!r}")
    return onnx.load(str(path), load_external_data=False)


def layout(path: str | os.PathLike | onnx.ModelProto,
           max_nodes: int = DEFAULT_MAX_NODES) -> tuple[list[tuple[str, str, int, int]], list[tuple[int, int]]]:
    """The first `max_nodes` nodes in graph (topological) order as (name, op_type, layer, slot), where
    layer is the longest path from a graph input, plus the edges (producer index, consumer index)."""
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
    nodes = list(_model(path).graph.node)[:max_nodes]
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


def figure(path: str | os.PathLike | onnx.ModelProto, *, max_nodes: int = DEFAULT_MAX_NODES,
           title: str | None = None) -> Any:
    """A static view for the published HTML: op counts (left) and the first nodes as a layered graph."""
    import matplotlib.pyplot as plt

    from .onnx_export import inventory

    model = _model(path)
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
        graph.text(x, -y, op, ha="center", va="center", fontsize=7, zorder=2,
                   bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "tab:blue"})
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


def interactive(path: str | os.PathLike, *, port: int | None = None, height: int = 600) -> Any:
    """Serve `path` with netron on localhost (never opening a browser) and return an IFrame for the
    notebook; None in headless runs, where a localhost frame would be dead in the published page."""
    target = Path(path)
    if not target.is_file():
        raise FileNotFoundError(f"path: no ONNX file at {str(target)!r}")
    if report.headless():
        return None
    import netron

    address = netron.start(str(target), address=("localhost", port), browse=False)
    return netron.widget(address, height=height)


def stop(address: Any = None) -> None:
    """Stop netron servers this process started (all of them when `address` is None)."""
    import netron

    netron.stop(address)

"""The call chains drawn as one tree, so the path from the host into natten reads at a glance."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .calls import CallChain, CallTrace


def chain_tree(chains: Sequence[CallChain]) -> tuple[list[tuple[int, int, str]], list[tuple[int, int]]]:
    """Merge chains into a tree: nodes (depth, row, label) and edges (parent index, child index)."""
    nodes: list[tuple[int, int, str]] = []
    edges: list[tuple[int, int]] = []
    index: dict[tuple[str, ...], int] = {}
    rows = 0
    for chain in chains:
        labels = chain.labels()
        for depth in range(len(labels)):
            key = tuple(labels[: depth + 1])
            if key in index:
                continue
            if nodes and depth <= nodes[-1][0]:
                rows += 1
            index[key] = len(nodes)
            nodes.append((depth, rows, labels[depth]))
            if depth:
                edges.append((index[key[:-1]], index[key]))
    return nodes, edges


def draw_chains(chains: Sequence[CallChain], ax: Any, highlight: str = "") -> None:
    """Draw the call tree left to right; nodes inside the target are shaded, `highlight`ed labels in red."""
    nodes, edges = chain_tree(chains)
    depth = max((n[0] for n in nodes), default=0) + 1
    rows = max((n[1] for n in nodes), default=0) + 1
    texts = []
    for x, y, label in nodes:
        outside = re.search(r"\.py:\d+$", label) is not None
        colour = "mistyrose" if highlight and label.endswith(highlight) else ("white" if outside else "lavender")
        texts.append(
            ax.text(
                x,
                -y,
                label,
                ha="center",
                va="center",
                fontsize=8,
                bbox={"boxstyle": "round", "fc": colour, "ec": "0.4"},
            )
        )
    for parent, child in edges:  # same row: straight on; lower rows: down from the parent, then right
        same_row = nodes[parent][1] == nodes[child][1]
        ax.annotate(
            "",
            xy=(0, 0.5),
            xycoords=texts[child],
            xytext=(1, 0.5) if same_row else (0.85, 0),
            textcoords=texts[parent],
            arrowprops={
                "arrowstyle": "->",
                "color": "0.45",
                "shrinkA": 0,
                "shrinkB": 2,
                "connectionstyle": "arc3" if same_row else "angle,angleA=-90,angleB=180,rad=0",
            },
        )
    ax.set_xlim(-0.6, depth - 0.4)
    ax.set_ylim(-rows + 0.4, 0.6)
    ax.axis("off")


def plot_call_chains(run: CallTrace, highlight: str = "", title: str | None = None) -> Any:
    """Notebook 01's figure: the chains of one traced call as a tree, sized to the longest chain and the number
    of branches, titled with the target (shaded) unless `title` says more. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    if not run.chains:
        raise ValueError(f"run: the traced call never entered {run.target}, so there is no chain to draw")
    fig, ax = plt.subplots(figsize=(2.6 * max(len(c.shown()) for c in run.chains), 0.42 * len(run.leaves()) + 1.2))
    draw_chains(run.chains, ax, highlight=highlight)
    ax.set_title(title or f"Call chains into {run.target} (shaded: inside {run.target})")
    return fig

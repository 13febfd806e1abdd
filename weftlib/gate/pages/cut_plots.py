"""What runs where, drawn: every node of a cut graph coloured by the side it runs on (and why a host node is
there), the segments and the tensors handed across, and the same colours as graph-viewer node data.
"""

from __future__ import annotations

SIDE_COLOURS = {"device": "#4caf50", "host (refused)": "#e53935", "host (unjudged)": "#ffb300", "host": "#9e9e9e"}


def node_sides(part, prediction) -> dict[str, str]:
    """Node -> "device", or "host (refused)", "host (unjudged)", "host" (predicted to parse, kept by the cut)."""
    sides = {}
    for s in part.segments:
        for n in s.nodes:
            if s.runs_on == "device":
                sides[n] = "device"
            else:
                p = prediction.nodes.get(n, "parse")
                sides[n] = {"refused": "host (refused)", "unjudged": "host (unjudged)"}.get(p, "host")
    return sides


def plot_partition(part, prediction):
    """What runs where. Top: every node in execution order, coloured by the side it runs on (and why a host
    node is there), segment boundaries marked. Bottom: the segments, device above and host below, and every
    tensor the cut hands across (dashed, its size)."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    sides = node_sides(part, prediction)
    order = [n for s in part.segments for n in s.nodes]
    fig, (strip, chain) = plt.subplots(2, 1, figsize=(13, 5.5), gridspec_kw={"height_ratios": [1, 2]})
    # one image row, a pixel column per node: a bar per node was 1024 patches to draw and save per graph
    row = np.array([[to_rgb(SIDE_COLOURS[sides[n]]) for n in order]]).reshape(1, len(order), 3)
    strip.imshow(row, aspect="auto", interpolation="nearest", extent=(-0.5, len(order) - 0.5, 0, 1))
    edge = 0
    for s in part.segments:
        strip.axvline(edge - 0.5, color="white", lw=1.5)
        edge += len(s.nodes)
    c = part.coverage
    strip.set_title(
        f"{part.model}: {c.nodes[0]} of {c.nodes[1]} nodes, {c.share('macs'):.0%} of the MACs and "
        f"{c.share('params'):.0%} of the parameters on the device; {len(part.device_segments)} device segment(s), "
        f"{c.crossings} tensors in or out of the device, {c.bytes_crossing / 2**20:.2f} MiB per inference",
        fontsize=9,
    )
    strip.set_xlim(-0.5, max(len(order), 1) - 0.5)
    strip.set_yticks([])
    strip.set_xlabel("nodes in execution order (white lines: segment boundaries)", fontsize=8)
    strip.legend(handles=[Patch(color=v, label=k) for k, v in SIDE_COLOURS.items()], loc="upper left",
                 bbox_to_anchor=(1.0, 1.0), fontsize=7)  # fmt: skip
    where = {s.index: (s.index, 1.0 if s.runs_on == "device" else 0.0) for s in part.segments}
    made_by = {t: s.index for s in part.segments for t in s.outputs}
    for s in part.segments:
        for t in s.inputs:
            if t in made_by and part.segments[made_by[t]].runs_on != s.runs_on:
                (xa, ya), (xb, yb) = where[made_by[t]], where[s.index]
                chain.annotate(
                    "", (xb, yb), (xa, ya), arrowprops={"arrowstyle": "->", "ls": "--", "color": "0.3", "lw": 0.8}
                )
    for s in part.segments:
        x, y = where[s.index]
        colour = SIDE_COLOURS["device"] if s.runs_on == "device" else "#bdbdbd"
        chain.scatter([x], [y], s=40 + 6 * len(s.nodes), color=colour, edgecolor="0.3", zorder=3)
        if s.runs_on == "device" or len(part.segments) <= 24:
            chain.text(x, y + (0.18 if s.runs_on == "device" else -0.22), str(len(s.nodes)), ha="center", fontsize=7)
    chain.set_yticks([0, 1], ["host", "device"])
    chain.set_ylim(-0.5, 1.5)
    chain.set_xlabel(
        "segments in execution order (numbers: nodes; dashed: a tensor handed between device and host)", fontsize=8
    )
    for side in ("top", "right"):
        chain.spines[side].set_visible(False)
    fig.tight_layout()
    return fig


def node_data(part, prediction, graph_id: str) -> dict[str, object]:
    """The cut as Model Explorer node data (its `ModelNodeData` JSON: graph id -> results and thresholds), so
    the graph viewer can colour every node by the side it runs on: 0 host (refused), 1 host (unjudged),
    2 host (kept by the cut), 3 device."""
    value = {"host (refused)": 0, "host (unjudged)": 1, "host": 2, "device": 3}
    results = {n: {"value": value[s]} for n, s in node_sides(part, prediction).items()}
    thresholds = [{"value": v, "bgColor": SIDE_COLOURS[k]} for k, v in value.items()]
    return {graph_id: {"name": "runs on", "results": results, "thresholds": thresholds}}

"""The pictures of notebooks 05 and 06: the op matrix and the backtest (05), and what runs where in a cut graph
(06), drawn and as graph-viewer node data, in the colours of `colours`.

Each function returns a figure (or, for the viewer, its node data); the notebook's recorder saves the figures.
matplotlib is imported inside the drawing functions: a page that only reads records starts without it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from ..cut.segments import Partition
from ..predict.nodes import GraphPrediction
from ..vocabulary import Prediction, Side
from .colours import AGREEMENT_COLOURS, HOST_REFUSED, HOST_UNJUDGED, NEUTRAL, PREDICTION_COLOURS, SIDE_COLOURS
from .gate_tables import BY_AGREEMENT

if TYPE_CHECKING:
    import pandas as pd


def plot_op_matrix(counts: pd.DataFrame, status: pd.DataFrame) -> Any:
    """A heat-map-like grid: one row per model, one column per op, coloured by allowlist status."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    rows, cols = counts.shape
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * cols + 2), max(2.0, 0.45 * rows + 1.5)))
    image = [[to_rgb(PREDICTION_COLOURS.get(status.iat[i, j], "#ffffff")) for j in range(cols)] for i in range(rows)]
    ax.imshow(image, aspect="auto")
    for (i, j), n in ((ij, counts.iat[ij]) for ij in ((i, j) for i in range(rows) for j in range(cols))):
        if n:
            ax.text(j, i, str(n), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(cols), counts.columns, rotation=90, fontsize=8)
    ax.set_yticks(range(rows), counts.index, fontsize=8)
    ax.set_title("ONNX ops per exported graph, coloured by the gate's prediction (numbers: node count)")
    ax.legend(
        handles=[Patch(color=c, label=s) for s, c in PREDICTION_COLOURS.items()],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
    )
    return fig


def plot_backtest(counts: pd.DataFrame) -> Any:
    """One bar per source of the public record: outcomes the gate agrees with, leaves unjudged, disagrees with."""
    import matplotlib.pyplot as plt

    labels = [f"{s} (DFC {d})" for s, d in zip(counts["source"], counts["dfc"])]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(labels) + 1.4))
    left = [0] * len(labels)
    for column in BY_AGREEMENT:
        colour = AGREEMENT_COLOURS[column]
        values = list(counts[column])
        ax.barh(labels, values, left=left, color=colour, label=column)
        left = [a + b for a, b in zip(left, values)]
    ax.invert_yaxis()
    ax.set_xlabel("public DFC outcomes rebuilt as graphs")
    ax.set_title("The device gate against the public record")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def node_sides(part: Partition, prediction: GraphPrediction) -> dict[str, str]:
    """Node -> "device", or "host (refused)", "host (unjudged)", "host" (predicted to parse, kept by the cut)."""
    why: dict[str, str] = {Prediction.REFUSED: HOST_REFUSED, Prediction.UNJUDGED: HOST_UNJUDGED}
    sides = {}
    for s in part.segments:
        for n in s.nodes:
            if s.runs_on == Side.DEVICE:
                sides[n] = Side.DEVICE.value
            else:
                sides[n] = why.get(prediction.nodes.get(n, Prediction.PARSE), Side.HOST.value)
    return sides


def plot_partition(part: Partition, prediction: GraphPrediction) -> Any:
    """What runs where. Top: every node in execution order, coloured by the side it runs on (and why a host
    node is there), segment boundaries marked. Bottom: the segments, device above and host below, and every
    tensor the cut hands across (dashed, its size). The figure is let go by pyplot at once: 06 draws one per graph
    (40-odd) and pyplot warns past 20 open figures; it still saves and shows (`display`), and is freed after."""
    import matplotlib.pyplot as plt

    fig, (strip, chain) = plt.subplots(2, 1, figsize=(13, 5.5), gridspec_kw={"height_ratios": [1, 2]})
    plt.close(fig)
    _node_strip(strip, part, node_sides(part, prediction))
    _segment_chain(chain, part)
    fig.tight_layout()
    return fig


def _node_strip(strip: Any, part: Partition, sides: dict[str, str]) -> None:
    """The top of `plot_partition`: a pixel column per node, coloured by its side."""
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    order = [n for s in part.segments for n in s.nodes]
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


def _segment_chain(chain: Any, part: Partition) -> None:
    """The bottom of `plot_partition`: the segments, device above and host below, and the tensors handed across."""
    where = {s.index: (s.index, 1.0 if s.runs_on == Side.DEVICE else 0.0) for s in part.segments}
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
        colour = SIDE_COLOURS[Side.DEVICE] if s.runs_on == Side.DEVICE else NEUTRAL
        chain.scatter([x], [y], s=40 + 6 * len(s.nodes), color=colour, edgecolor="0.3", zorder=3)
        if s.runs_on == Side.DEVICE or len(part.segments) <= 24:
            chain.text(x, y + (0.18 if s.runs_on == Side.DEVICE else -0.22), str(len(s.nodes)), ha="center", fontsize=7)
    chain.set_yticks([0, 1], [Side.HOST.value, Side.DEVICE.value])
    chain.set_ylim(-0.5, 1.5)
    chain.set_xlabel(
        "segments in execution order (numbers: nodes; dashed: a tensor handed between device and host)", fontsize=8
    )
    for side in ("top", "right"):
        chain.spines[side].set_visible(False)


def pictures(
    partitions: dict[Path, Partition], prediction: dict[Path, GraphPrediction], only: Iterable[Path] | None = None
) -> dict[str, Any]:
    """A picture of each cut (file name -> figure): `plot_partition`; of the models in `only` when given."""
    chosen = list(partitions) if only is None else list(only)
    return {f"{model.stem}.png": plot_partition(partitions[model], prediction[model]) for model in chosen}


def node_data(part: Partition, prediction: GraphPrediction, graph_id: str) -> dict[str, object]:
    """The cut as Model Explorer node data (its `ModelNodeData` JSON: graph id -> results and thresholds), so
    the graph viewer can colour every node by the side it runs on: 0 host (refused), 1 host (unjudged),
    2 host (kept by the cut), 3 device."""
    value = {HOST_REFUSED: 0, HOST_UNJUDGED: 1, Side.HOST.value: 2, Side.DEVICE.value: 3}
    results = {n: {"value": value[s]} for n, s in node_sides(part, prediction).items()}
    thresholds = [{"value": v, "bgColor": SIDE_COLOURS[k]} for k, v in value.items()]
    return {graph_id: {"name": "runs on", "results": results, "thresholds": thresholds}}


def node_data_files(
    partitions: dict[Path, Partition], prediction: dict[Path, GraphPrediction], folder: str | os.PathLike
) -> list[Path]:
    """Model Explorer node data for each cut (the viewer's picture of it), written as `<stem>.node_data.json`
    into `folder`."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    written = []
    for model, part in partitions.items():
        graph_id = onnx.load(str(model), load_external_data=False).graph.name
        path = node_data_file(folder, model)
        path.write_text(json.dumps(node_data(part, prediction[model], graph_id), indent=1))
        written.append(path)
    return written


def node_data_file(folder: str | os.PathLike, model: Path) -> Path:
    """Where `node_data_files` writes a model's node data: `<folder>/<stem>.node_data.json`."""
    return Path(folder) / f"{model.stem}.node_data.json"

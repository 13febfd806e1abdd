"""Notebook 02's figures, built from the benchmark's rows and the export summaries (the notebook only saves
and shows them). Each returns the matplotlib Figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt


def plot_latency(rows: Any, geometries: Sequence[str], title: str) -> Any:
    """Median seconds per call against query tokens, log-log, one line per (method, backend), for the rows
    of `benchmark.sweep` that ran (`status` ok, a time) at the named geometries."""
    timed = rows[(rows["status"] == "ok") & rows["seconds"].notna() & rows["geometry"].isin(list(geometries))]
    if timed.empty:
        raise ValueError(f"rows: no timed row at the geometries {list(geometries)}")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for (method, backend), group in timed.groupby(["method", "backend"]):
        ax.plot(group["tokens"], group["seconds"], marker="o", label=f"{method} ({backend})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("query tokens (H x W)")
    ax.set_ylabel("median seconds per call")
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=2)
    return fig


def plot_op_inventory(ops: Mapping[str, Mapping[str, int]], title: str) -> Any:
    """Stacked bars: per exported formulation (`ops`: method -> op type -> node count), its nodes by op type."""
    import pandas as pd

    if not ops:
        raise ValueError("ops: no exported formulation to draw")
    fig, ax = plt.subplots(figsize=(9, 4))
    counts = pd.DataFrame({m: dict(o) for m, o in ops.items()}).fillna(0).T
    counts.plot.bar(stacked=True, ax=ax, colormap="tab20")
    ax.set_ylabel("nodes")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2, bbox_to_anchor=(1.01, 1), loc="upper left")
    return fig

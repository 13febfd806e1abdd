"""Notebook 03's figure: peak memory against grid resolution, the model beside the measurement, and the model
at the headline setting against this machine's RAM and the device's memory. Returns the matplotlib Figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt

from . import memory
from .conv import METHODS


def memory_curves(
    counts: Mapping[tuple[str, int], int],
    resolutions: Sequence[int],
    *,
    measure_shape: str,
    measure_channels: int,
    measure_dtype: str,
    chunk_rows: int,
    headline_shape: str,
    headline_channels: int,
    headline_dtype: str,
) -> Any:
    """The modelled peak per method and resolution (`counts`: (shape, res) -> occupied voxels) at the
    measurement setting (im2col chunked as measured) and at the headline setting, for the resolutions where
    both shapes were counted."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "res": r,
                "method": m,
                "N": counts[(measure_shape, r)],
                "measure_setting": memory.peak_model(
                    m,
                    r,
                    counts[(measure_shape, r)],
                    measure_channels,
                    measure_channels,
                    measure_dtype,
                    chunk_rows=chunk_rows if m == "im2col" else None,
                ),
                "headline_setting": memory.peak_model(
                    m, r, counts[(headline_shape, r)], headline_channels, headline_channels, headline_dtype
                ),
            }
            for r in resolutions
            for m in METHODS
            if (headline_shape, r) in counts
        ]
    )


def plot_memory_vs_resolution(
    curves: Any,
    measured: Any,
    *,
    measure_shape: str,
    measure_channels: int,
    measure_dtype: str,
    headline_shape: str,
    headline_channels: int,
    headline_dtype: str,
    ram_bytes: int,
    device_memory_gib: float,
) -> Any:
    """Left: `curves` (from `memory_curves`) at the measurement setting with the measured peaks of
    `measure_shape` (rows of `memory.measure_table`) as open circles. Right: the headline setting against
    `ram_bytes` and `device_memory_gib`. One colour per method on both sides."""
    if curves.empty:
        raise ValueError("curves: no modelled point to draw")
    colors = dict(zip(METHODS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for m, g in curves.groupby("method"):
        axes[0].loglog(g["res"], g["measure_setting"], marker=".", color=colors[m], label=f"{m} (model)")
    for m, g in measured[measured["shape"] == measure_shape].groupby("method"):
        axes[0].loglog(g["res"], g["measured_bytes"], "o", mfc="none", ms=10, color=colors[m], label=f"{m} (measured)")
    axes[0].set(
        title=f"{measure_shape}, C={measure_channels}, {measure_dtype} (im2col chunked)",
        xlabel="grid resolution",
        ylabel="peak bytes",
    )
    for m, g in curves.groupby("method"):
        axes[1].loglog(g["res"], g["headline_setting"], marker=".", color=colors[m], label=m)
    axes[1].axhline(ram_bytes, color="k", ls="--", label="this machine's RAM")
    axes[1].axhline(device_memory_gib * 2**30, color="r", ls=":", label=f"device memory ({device_memory_gib} GiB)")
    axes[1].set(
        title=f"{headline_shape}, C={headline_channels}, {headline_dtype} (model; im2col unchunked)",
        xlabel="grid resolution",
    )
    for ax in axes:
        ax.legend(fontsize=7)
    return fig

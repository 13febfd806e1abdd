"""The byte formulas of the study, each written once: the dense grids, the sparse features, the int64
neighbour table, im2col's gathered rows, the RFD's named quantities and what a host-gather split moves.

A leaf of `weftlib.sparse`: `conv`'s dense budget check, the peak model (`memory`) and the benchmark all
read their bytes here, so none of them imports another for a formula.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # pandas is imported where tables are built: measuring subprocesses start faster without it
    import pandas as pd

DTYPES = {"float32": torch.float32, "float16": torch.float16}
INDEX_BYTES = 8  # the neighbour table and gather indices are int64
# TRELLIS.2 sparse decoder: channel width per grid resolution (one 64-wide conv at 1024, 128 at 512, ...)
DECODER_STAGES = ((64, 1024), (128, 512), (256, 256), (512, 128), (1024, 64))


def itemsize(dtype: str) -> int:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {dtype!r}")
    return torch.empty((), dtype=DTYPES[dtype]).element_size()


def grid_bytes(res: int, channels: int, itemsize: int) -> int:
    """A dense [channels, res^3] grid: what densifying costs per tensor."""
    return res**3 * channels * itemsize


def features_bytes(n: int, channels: int, itemsize: int) -> int:
    """Sparse features [n, channels]: one value per active voxel and channel."""
    return n * channels * itemsize


def table_bytes(n: int, taps: int) -> int:
    """The int64 neighbour table [n, taps] (taps = k^3)."""
    return n * taps * INDEX_BYTES


def gathered_bytes(n: int, taps: int, channels: int, itemsize: int) -> int:
    """The gathered rows [n, taps * channels]: im2col's buffer, and what a host-gather split sends."""
    return n * taps * channels * itemsize


def components(res: int, n: int, cin: int, cout: int, dtype: str = "float16", kernel_size: int = 3) -> dict[str, int]:
    """The named quantities of the RFD in bytes: dense tensor, dense conv in+out, sparse features, im2col
    buffer, accumulate peak, neighbour table."""
    e, k3 = itemsize(dtype), kernel_size**3
    return {
        "dense_tensor": grid_bytes(res, cout, e),
        "dense_conv_in_out": grid_bytes(res, cin + cout, e),
        "sparse_features": features_bytes(n, cin + cout, e),
        "im2col_buffer": gathered_bytes(n, k3, cin, e),
        "accumulate_peak": features_bytes(n, cin + cout, e),
        "neighbor_table": table_bytes(n, k3),
    }


def split_transfer(n: int, cin: int, cout: int, dtype: str = "float16", kernel_size: int = 3) -> dict[str, int]:
    """Bytes a host-gather / device-matmul split moves for one layer: the gathered [N, k^3 Cin] rows in, the
    [N, Cout] result out (the weight stays resident on the device)."""
    e, k3 = itemsize(dtype), kernel_size**3
    to_device, to_host = gathered_bytes(n, k3, cin, e), features_bytes(n, cout, e)
    return {
        "to_device_bytes": to_device,
        "to_host_bytes": to_host,
        "total_bytes": to_device + to_host,
        "weight_bytes": k3 * cin * cout * e,
    }


def decoder_transfers(
    counts: dict[int, int], dtype: str = "float16", stages: Iterable[tuple[int, int]] = DECODER_STAGES
) -> pd.DataFrame:
    """Per decoder stage (res, channels) with a known voxel count: what one conv layer moves under the split."""
    import pandas as pd

    rows = [
        {"res": r, "C": c, "N": counts[r], **split_transfer(counts[r], c, c, dtype)} for r, c in stages if r in counts
    ]
    return pd.DataFrame(rows)

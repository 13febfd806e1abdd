"""Submanifold 3D convolution on an occupied voxel set, five ways, and the kernel map they all share.

A submanifold convolution computes outputs only at occupied voxels and reads inputs only from occupied voxels
(TRELLIS.2's sparse VAE decoder, backend flex_gemm). ONNX has no such op, so an exporter must either densify
(`"dense"`: scatter into a grid, Conv, gather back) or spell it with standard ops: `"im2col"` (one gather to
`[N, k^3 Cin]`, one MatMul), `"accumulate"` (per offset: gather, then MatMul + Add fused in place, which exports
as Gemm) or `"scatter"` (per offset:
gather the valid pairs, MatMul, ScatterND-add: the rulebook pattern of spconv-style libraries).
`"compact"` is a host path, not an export form: it multiplies only the (voxel, offset) pairs that exist, from a
`Rulebook` (`pairs`): the kernel map in pair form, built once per voxel set by `rulebook` and reused by every
layer, as spconv reuses its rulebook. `method="auto"` (the default) picks the fastest exact path measured
for what it is given (`choose_method`) and sizes its chunks from the shapes and the CPU's L2 cache
(`auto_chunk_rows`).

Offset order (shared by `kernel_map`, the weight layout and every method): offset `o` of a `k^3` kernel is
`(a, b, c)` with `o = a*k^2 + b*k + c`, neighbour `coord + (a - k//2, b - k//2, c - k//2)`; this is the
flattening of `torch.nn.Conv3d`'s weight `[Cout, Cin, k, k, k]` when the dense grid is indexed `[x, y, z]`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from weftlib.onnx_core.tracing import is_tracing

from . import pairs
from .footprint import grid_bytes, table_bytes
from .pairs import Rulebook
from .voxels import linear_keys

if TYPE_CHECKING:
    import pandas as pd

METHODS = ("dense", "im2col", "accumulate", "scatter", "compact")
SPARSE_METHODS = ("im2col", "accumulate", "scatter")  # the sparse methods that export with static shapes
AUTO = "auto"
DEFAULT_DENSE_BUDGET = 8 << 30  # bytes the dense method may allocate before it refuses


class DenseBudgetError(MemoryError):
    """The dense method would need more memory than its budget allows."""


# ----------------------------------------------------------------------------------------------- kernel map
def kernel_map(coords: torch.Tensor, kernel_size: int = 3) -> torch.Tensor:
    """Neighbour table int64 [N, k^3]: row i, column o holds the index of voxel coords[i] + offset o, or -1.

    Sort + searchsorted on linearised keys, never a dense grid. Padded keys never wrap, so an offset is a
    constant key shift and the queries of a block of sorted keys are sorted too; one search per (dx, dy) finds
    the dz = 0 neighbour, and the others sit right next to that position in the sorted keys. Rows are filled in
    blocks, so the temporaries beyond the table are the keys, their order and one block (about 3 N int64).
    """
    _check_coords(coords)
    _check_kernel_size(kernel_size)
    pad = kernel_size // 2
    n = len(coords)
    table = torch.empty((n, kernel_size**3), dtype=torch.int64)
    if n == 0:
        return table
    span = int(coords.max()) + 1 + 2 * pad
    keys = linear_keys(coords.to(torch.int64) + pad, span)
    presorted = bool((keys[1:] > keys[:-1]).all())
    sorted_keys, order = (keys, None) if presorted else torch.sort(keys)
    if not presorted and bool((sorted_keys[1:] == sorted_keys[:-1]).any()):
        raise ValueError("coords must be unique voxels (found a repeated coordinate)")
    del keys
    for start in range(0, n, _MAP_BLOCK):
        block = _map_block(sorted_keys, start, min(start + _MAP_BLOCK, n), kernel_size, span)
        if order is None:
            table[start : start + len(block)] = block
        else:
            table[order[start : start + len(block)]] = torch.where(block >= 0, order[block.clamp(min=0)], -1)
    return table


_MAP_BLOCK = 1 << 16


def _map_block(sorted_keys: torch.Tensor, start: int, stop: int, kernel_size: int, span: int) -> torch.Tensor:
    """Neighbour positions (in sorted order) of sorted_keys[start:stop], [rows, k^3] in the documented order."""
    pad = kernel_size // 2
    n = len(sorted_keys)
    mine = sorted_keys[start:stop]
    cols: dict[int, torch.Tensor] = {}
    for dx in range(-pad, pad + 1):
        for dy in range(-pad, pad + 1):
            base = mine + (dx * span + dy) * span
            pos = torch.searchsorted(sorted_keys, base)  # first index with key >= base
            hit0 = sorted_keys.index_select(0, pos.clamp(max=n - 1)) == base
            for dz in range(-pad, pad + 1):
                # next to a present or absent key base, the key base-1 sits at pos-1 and base+1 at pos+hit0
                if dz == 0:
                    cand = pos.clone()
                elif dz == -1:
                    cand = pos - 1
                elif dz == 1:
                    cand = pos + hit0.long()
                else:
                    cand = torch.searchsorted(sorted_keys, base + dz)
                cand.clamp_(0, n - 1)
                o = ((dx + pad) * kernel_size + (dy + pad)) * kernel_size + (dz + pad)
                cols[o] = cand.masked_fill_(sorted_keys.index_select(0, cand) != base + dz, -1)
    return torch.stack([cols[o] for o in range(kernel_size**3)], dim=1)


def kernel_map_bytes(n: int, kernel_size: int = 3) -> int:
    """Bytes of the int64 neighbour table (`footprint.table_bytes`, the memory model's formula)."""
    return table_bytes(n, kernel_size**3)


# ----------------------------------------------------------------------------------------------- checks
def _check_kernel_size(kernel_size: int) -> None:
    if not isinstance(kernel_size, int) or kernel_size < 1 or kernel_size % 2 == 0:
        raise ValueError(f"kernel_size must be a positive odd int (a centred kernel), got {kernel_size!r}")


def _check_coords(coords: torch.Tensor) -> None:
    if coords.ndim != 2 or coords.shape[1] != 3:
        raise ValueError(f"coords must be [N, 3], got {tuple(coords.shape)}")
    if coords.dtype.is_floating_point:
        raise ValueError(f"coords must be an integer tensor, got {coords.dtype}")
    if len(coords) and int(coords.min()) < 0:
        raise ValueError("coords must be non-negative voxel indices")


def _check_conv_args(
    feats: torch.Tensor,
    nbr: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    method: str,
    chunk_rows: int | None,
) -> None:
    if method not in (*METHODS, AUTO):
        raise ValueError(f"method must be one of {(*METHODS, AUTO)}, got {method!r}")
    if feats.ndim != 2:
        raise ValueError(f"feats must be [N, Cin], got {tuple(feats.shape)}")
    if weight.ndim != 5 or len(set(weight.shape[2:])) != 1:
        raise ValueError(f"weight must be Conv3d layout [Cout, Cin, k, k, k], got {tuple(weight.shape)}")
    k = weight.shape[2]
    _check_kernel_size(k)
    if weight.shape[1] != feats.shape[1]:
        raise ValueError(f"weight has Cin={weight.shape[1]} but feats has {feats.shape[1]} channels")
    if nbr.ndim != 2 or nbr.shape != (feats.shape[0], k**3):
        raise ValueError(f"nbr must be [N, k^3] = {(feats.shape[0], k**3)}, got {tuple(nbr.shape)}")
    if nbr.dtype != torch.int64:
        raise ValueError(f"nbr must be int64 (as kernel_map returns), got {nbr.dtype}")
    if weight.dtype != feats.dtype:
        raise ValueError(f"weight dtype {weight.dtype} differs from feats dtype {feats.dtype}")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"bias must be [Cout] = [{weight.shape[0]}], got {tuple(bias.shape)}")
    _check_chunk_rows(chunk_rows)


def _check_chunk_rows(chunk_rows: int | None) -> None:
    if chunk_rows is not None and (not isinstance(chunk_rows, int) or chunk_rows < 1):
        raise ValueError(f"chunk_rows must be a positive int or None, got {chunk_rows!r}")


def _check_dense_args(
    feats: torch.Tensor, weight: torch.Tensor, coords: torch.Tensor | None, res: int | None, budget_bytes: int
) -> None:
    """The dense route needs the voxel coordinates and grid size, and refuses before allocating over budget."""
    if coords is None or res is None:
        raise ValueError("method='dense' needs coords= and res= to place the features on the grid")
    _check_coords(coords)
    if coords.shape[0] != feats.shape[0]:
        raise ValueError(f"coords has {coords.shape[0]} rows but feats has {feats.shape[0]}")
    if len(coords) and int(coords.max()) >= res:
        raise ValueError(f"coords reach {int(coords.max())}, outside a grid of res={res}")
    need = dense_bytes(res, weight.shape[1], weight.shape[0], feats.dtype)
    if need > budget_bytes:
        raise DenseBudgetError(
            f"method='dense' at res={res} needs {need} bytes ({need / 2**30:.2f} GiB) for its input and "
            f"output grids, over budget_bytes={budget_bytes} ({budget_bytes / 2**30:.2f} GiB)"
        )


def dense_bytes(res: int, cin: int, cout: int, dtype: torch.dtype) -> int:
    """Bytes of the dense route's two grids: input [Cin, res^3] and output [Cout, res^3] (the memory model's)."""
    return grid_bytes(res, cin + cout, torch.empty((), dtype=dtype).element_size())


# ----------------------------------------------------------------------------------------------- one entry
def submanifold_conv3d(
    feats: torch.Tensor,
    nbr: torch.Tensor | Rulebook,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    method: str = AUTO,
    *,
    coords: torch.Tensor | None = None,
    res: int | None = None,
    budget_bytes: int = DEFAULT_DENSE_BUDGET,
    chunk_rows: int | None = None,
) -> torch.Tensor:
    """Submanifold convolution of `feats` [N, Cin] on the voxel set whose kernel map is `nbr`: the neighbour
    table [N, k^3] (`kernel_map`) or its pair form (`rulebook(table)`, which carries the table too).

    `weight` is in Conv3d layout [Cout, Cin, k, k, k]. `"auto"` (the default) runs `choose_method`'s pick
    with chunks sized by `auto_chunk_rows`: `"compact"` for a rulebook, chunked `"im2col"` for a table. The
    named methods stay for the memory study and the exports. `"dense"` also needs `coords` and `res` and
    refuses (DenseBudgetError naming the bytes) when its grids exceed `budget_bytes`; `"im2col"` processes
    `chunk_rows` rows at a time when given (bounding its buffer to chunk_rows * k^3 * Cin); `"compact"` given
    a table builds its rulebook first, in chunks of `chunk_rows` voxels (auto-sized when None).
    """
    book, table = (nbr, nbr.table) if isinstance(nbr, Rulebook) else (None, nbr)
    _check_conv_args(feats, table, weight, bias, method, chunk_rows)
    if book is not None and method in (AUTO, "compact") and chunk_rows not in (None, book.chunk_rows):
        raise ValueError(f"chunk_rows={chunk_rows} differs from the rulebook's chunks of {book.chunk_rows} voxels")
    if method == AUTO:
        tracing = is_tracing(feats)
        method = choose_method(feats.shape[0], table.shape[1], tracing=tracing, has_rulebook=book is not None)
        if chunk_rows is None and not tracing and method == "im2col":  # an export gets the one-MatMul form
            chunk_rows = auto_chunk_rows(method, table.shape[1], feats.shape[1], feats.element_size(), feats.shape[0])
    if method == "dense":
        _check_dense_args(feats, weight, coords, res, budget_bytes)
        assert coords is not None and res is not None  # _check_dense_args refuses None
        out = _dense(feats, coords, weight, res)
    elif method == "im2col":
        out = _im2col(feats, table, weight, chunk_rows)
    elif method == "accumulate":
        out = _accumulate(feats, table, weight)
    elif method == "compact":
        book = book or rulebook(table, chunk_rows, feats.shape[1], feats.element_size())
        out = pairs.conv(feats, book, _flat_weight(weight).contiguous())
    else:
        out = _scatter(feats, table, weight)
    return out if bias is None else out.add_(bias)


def rulebook(nbr: torch.Tensor, chunk_rows: int | None = None, channels: int = 64, itemsize: int = 4) -> Rulebook:
    """The pair form of neighbour table `nbr` (`pairs.Rulebook`), in chunks of `chunk_rows` voxels, sized by
    `auto_chunk_rows` for layers of `channels` x `itemsize` bytes when None. Build it once per voxel set:
    every layer on that set then multiplies only the taps that have a neighbour."""
    if nbr.ndim != 2 or nbr.dtype != torch.int64:
        raise ValueError(
            f"nbr must be an int64 [N, k^3] table (as kernel_map returns), got {nbr.dtype} {tuple(nbr.shape)}"
        )
    _check_chunk_rows(chunk_rows)
    n, taps = nbr.shape
    return pairs.build(nbr, chunk_rows or rulebook_rows(n, taps, channels, itemsize))


def rulebook_rows(n: int, taps: int, channels: int, itemsize: int) -> int:
    """Voxels per rulebook chunk when the caller gives none: `auto_chunk_rows`, or all of a small set."""
    return auto_chunk_rows("compact", taps, channels, itemsize, n) or max(n, 1)


# ----------------------------------------------------------------------------------------------- auto
SMALL_ROWS = 4096  # below this many voxels one unchunked im2col GEMM is as fast as anything
CHUNK_L2_MULTIPLE = 14  # a chunk's working set in L2 caches: im2col, C = 64 fp32 -> about 4,200 rows
_L2_FALLBACK = 1 << 20


def l2_cache_bytes() -> int:
    """Per-core L2 size from sysfs (Linux); 1 MiB where it cannot be read."""
    from pathlib import Path

    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "level").read_text().strip() == "2":
                text = (index / "size").read_text().strip().upper()
                scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1)
                return int(text.rstrip("KM")) * scale
        except (OSError, ValueError):
            continue
    return _L2_FALLBACK


def choose_method(n: int, taps: int, tracing: bool = False, has_rulebook: bool = False) -> str:
    """The fastest exact path measured here for what the caller holds.

    With a rulebook (`rulebook`), 'compact': it multiplies only the taps that have a neighbour (about half
    the FLOPs of a surface voxel set), so a layer given the rulebook is faster than chunked im2col (the
    README and `scripts/bench_sparse.py` hold the times). With only the table, 'im2col', chunked by
    `auto_chunk_rows` for real voxel sets (one unchunked GEMM for small ones and under an exporter, where it
    is the static-shape form): building the rulebook inside one call would cost more than it saves. `n` and `taps`
    stay in the signature for kernels where the choice would differ."""
    del n, taps
    return "compact" if has_rulebook and not tracing else "im2col"


def auto_chunk_rows(method: str, taps: int, channels: int, itemsize: int, n: int) -> int | None:
    """Rows per chunk from the shapes and the L2 cache; None (no chunking) for small sets.

    The chunk's gathered rows (at most rows x taps x Cin: im2col's buffer, the most a rulebook chunk can
    gather) are CHUNK_L2_MULTIPLE L2 caches: the MatMul reads back from the outer caches what the gather
    just wrote, and the per-call cost of the ops stays small against the work: measured at the 1024 bunny,
    chunks of a few thousand rows beat both smaller chunks and one unchunked GEMM, for im2col and compact
    alike (the README holds the times). `method` stays for paths whose buffer would differ.
    """
    del method
    if n < SMALL_ROWS:
        return None
    budget = CHUNK_L2_MULTIPLE * l2_cache_bytes()
    return max(256, min(65536, budget // max(taps * channels * itemsize, 1)))


# ----------------------------------------------------------------------------------------------- methods
def _flat_weight(weight: torch.Tensor) -> torch.Tensor:
    """[Cout, Cin, k, k, k] -> [k^3, Cin, Cout], offset-major in the documented order."""
    cout, cin = weight.shape[:2]
    return weight.reshape(cout, cin, -1).permute(2, 1, 0)


def _dense(feats: torch.Tensor, coords: torch.Tensor, weight: torch.Tensor, res: int) -> torch.Tensor:
    grid = densify(feats, coords, res)
    out = F.conv3d(grid, weight, padding=weight.shape[2] // 2)
    del grid
    x, y, z = coords.to(torch.int64).unbind(1)
    return out[0, :, x, y, z].t().contiguous()


def _gather_masked(feats: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """feats[idx] with zero rows where idx == -1 (the gather reads row 0 there, the mask zeroes it)."""
    rows = feats.index_select(0, idx.clamp(min=0).reshape(-1)).reshape(*idx.shape, feats.shape[1])
    return rows.mul_((idx >= 0).unsqueeze(-1).to(feats.dtype))


def _im2col(feats: torch.Tensor, nbr: torch.Tensor, weight: torch.Tensor, chunk_rows: int | None) -> torch.Tensor:
    w = _flat_weight(weight).reshape(-1, weight.shape[0])  # [k^3 Cin, Cout]
    n = feats.shape[0]
    if chunk_rows is None or chunk_rows >= n:  # one gather, one MatMul: the form that exports
        cols = _gather_masked(feats, nbr)
        return cols.reshape(n, -1) @ w
    return _im2col_chunked(feats, nbr, w, chunk_rows)


def _im2col_chunked(feats: torch.Tensor, nbr: torch.Tensor, w: torch.Tensor, rows: int) -> torch.Tensor:
    """Row chunks through one reused buffer: the peak is one chunk whatever the allocator does with frees.

    Absent neighbours (-1) read an appended zero row instead of being masked after the gather: the mask
    pass cost as much as the gather itself at the 1024 grid. Chunks of a few thousand rows keep the buffer
    in cache between the gather that writes it and the MatMul that reads it.
    """
    n, cin = feats.shape
    k3 = nbr.shape[1]
    padded = torch.cat([feats, feats.new_zeros((1, cin))])  # row n is the zero row
    out = feats.new_empty((n, w.shape[1]))
    cols = feats.new_empty((rows * k3, cin))
    idx = torch.empty((rows * k3,), dtype=torch.int64)
    for start in range(0, n, rows):
        m = min(rows, n - start)
        part = nbr[start : start + m].reshape(-1)
        idx[: m * k3].copy_(part).masked_fill_(part < 0, n)
        torch.index_select(padded, 0, idx[: m * k3], out=cols[: m * k3])
        torch.mm(cols[: m * k3].view(m, k3 * cin), w, out=out[start : start + m])
    return out


def _accumulate(feats: torch.Tensor, nbr: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    w = _flat_weight(weight)
    out = feats.new_zeros((feats.shape[0], weight.shape[0]))
    for o in range(nbr.shape[1]):
        out.addmm_(_gather_masked(feats, nbr[:, o]), w[o])  # fused MatMul + Add, in place
    return out


def _scatter(feats: torch.Tensor, nbr: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    w = _flat_weight(weight)
    out = feats.new_zeros((feats.shape[0], weight.shape[0]))
    for o in range(nbr.shape[1]):
        dst = torch.nonzero(nbr[:, o] >= 0).squeeze(1)
        src = nbr[:, o].index_select(0, dst)
        out.index_add_(0, dst, feats.index_select(0, src) @ w[o])
    return out


# ----------------------------------------------------------------------------------------------- export
class SubmanifoldConv3d(nn.Module):
    """One sparse method as a module taking (feats, nbr), so it exports with the kernel map as a graph input.

    The loops over offsets unroll at export (k^3 gathers for "accumulate"/"scatter", one for "im2col").
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, method: str = "accumulate") -> None:
        super().__init__()
        if method not in SPARSE_METHODS:
            raise ValueError(f"method must be one of {SPARSE_METHODS} (dense exports as DenseConv3d), got {method!r}")
        self.method = method
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone(), requires_grad=False)

    def forward(self, feats: torch.Tensor, nbr: torch.Tensor) -> torch.Tensor:
        return submanifold_conv3d(feats, nbr, self.weight, self.bias, method=self.method)


class DenseConv3d(nn.Module):
    """The densify route's device half: a plain Conv on the dense grid [1, Cin, res, res, res]."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone(), requires_grad=False)

    def forward(self, grid: torch.Tensor) -> torch.Tensor:
        return F.conv3d(grid, self.weight, self.bias, padding=self.weight.shape[2] // 2)


def densify(feats: torch.Tensor, coords: torch.Tensor, res: int) -> torch.Tensor:
    """The host half of the densify route: features placed on a zero grid [1, C, res, res, res]."""
    _check_coords(coords)
    x, y, z = coords.to(torch.int64).unbind(1)
    grid = feats.new_zeros((1, feats.shape[1], res, res, res))
    grid[0, :, x, y, z] = feats.t()
    return grid


def reference_conv3d(
    feats: torch.Tensor, coords: torch.Tensor, weight: torch.Tensor, res: int, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Ground truth: fp64 torch conv3d on the dense grid, read at the active sites (tests and parity only)."""
    grid = densify(feats.double(), coords, res)
    out = F.conv3d(grid, weight.double(), None if bias is None else bias.double(), padding=weight.shape[2] // 2)
    x, y, z = coords.to(torch.int64).unbind(1)
    return out[0, :, x, y, z].t()


def equality_errors(
    feats: torch.Tensor,
    nbr: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    coords: torch.Tensor,
    res: int,
    methods: tuple[str, ...] = METHODS,
    chunk_rows: int = 97,
) -> dict[str, float]:
    """Each method's largest |method - conv3d| at the active sites, against `reference_conv3d` (fp64); the odd
    default `chunk_rows` puts chunk boundaries inside the voxel set."""
    ref = reference_conv3d(feats, coords, weight, res, bias)
    errors = {}
    for m in methods:
        out = submanifold_conv3d(feats, nbr, weight, bias, method=m, coords=coords, res=res, chunk_rows=chunk_rows)
        errors[m] = float((out.double() - ref).abs().max())
    return errors


def export_methods(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    feats: torch.Tensor,
    nbr: torch.Tensor,
    folder: os.PathLike | str,
    methods: tuple[str, ...] = SPARSE_METHODS,
    atol: float = 1e-4,
) -> dict[str, Any]:
    """Export each sparse method (inputs `feats`, `nbr`) to `folder/conv_<method>.onnx`; the export reports."""
    from pathlib import Path

    from weftlib.onnx_core import export as onnx_export

    bad = [m for m in methods if m not in SPARSE_METHODS]
    if bad:
        raise ValueError(f"methods must be among {SPARSE_METHODS}, got {bad}")
    return {
        m: onnx_export.export(
            SubmanifoldConv3d(weight, bias, m),
            (feats, nbr),
            Path(folder) / f"conv_{m}.onnx",
            input_names=["feats", "nbr"],
            output_names=["out"],
            atol=atol,
        )
        for m in methods
    }


def inventory_table(reports: dict[str, Any], device_ops: Any) -> pd.DataFrame:
    """Op counts per exported graph, with each op's listing in the device allowlist (`gate.DeviceOps`):
    allowed / blocker / unlisted, what its own entry predicts ("by pattern": its nodes are judged by the
    graph rules), and how many Gathers read a data-dependent index."""
    import pandas as pd

    from weftlib.gate.evidence import evidence_table

    predicted = {row["name"]: row["prediction"] for row in evidence_table(device_ops) if row["kind"] == "op"}
    ops = sorted({op for r in reports.values() for op in r.ops})
    rows = []
    for op in ops:
        row: dict[str, Any] = {"op": op, "standing": device_ops.status(op), "predicted": predicted.get(op, "unjudged")}
        row.update({name: r.ops.get(op, 0) for name, r in reports.items()})
        rows.append(row)
    gathers: dict[str, Any] = {
        "op": "(Gather, data-dependent index)",
        "standing": "rule gather_computed_index",
        "predicted": "unjudged",
    }
    gathers.update({name: len(r.dynamic_gathers) for name, r in reports.items()})
    return pd.DataFrame([*rows, gathers])


def export_dense(
    weight: torch.Tensor, bias: torch.Tensor | None, grid: torch.Tensor, folder: os.PathLike | str, atol: float = 1e-4
) -> Any:
    """Export the densify route's device half (a Conv on `grid`) to `folder/conv_dense.onnx`; its report."""
    from pathlib import Path

    from weftlib.onnx_core import export as onnx_export

    if grid.ndim != 5 or grid.shape[1] != weight.shape[1]:
        raise ValueError(f"grid must be [1, Cin={weight.shape[1]}, res, res, res], got {tuple(grid.shape)}")
    return onnx_export.export(
        DenseConv3d(weight, bias),
        (grid,),
        Path(folder) / "conv_dense.onnx",
        input_names=["grid"],
        output_names=["out"],
        atol=atol,
    )

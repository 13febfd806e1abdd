"""Submanifold 3D convolution on an occupied voxel set: the one public entry `submanifold_conv3d`, its
argument checks and its five methods (one entry per operation, as NATTEN's functional.py keeps).

A submanifold convolution computes outputs only at occupied voxels and reads inputs only from occupied voxels
(TRELLIS.2's sparse VAE decoder, backend flex_gemm). ONNX has no such op, so an exporter must either densify
(`"dense"`: scatter into a grid (`densify`), Conv, gather back) or spell it with standard ops: `"im2col"` (one
gather to `[N, k^3 Cin]`, one MatMul), `"accumulate"` (per offset: gather, then MatMul + Add fused in place,
which exports as Gemm) or `"scatter"` (per offset: gather the valid pairs, MatMul, ScatterND-add: the rulebook
pattern of spconv-style libraries). `"compact"` is a host path, not an export form: it multiplies only the
(voxel, offset) pairs that exist, from a `Rulebook` (`pairs`): the kernel map in pair form, built once per
voxel set and reused by every layer, as spconv reuses its rulebook. `method="auto"` (the default) runs
`method_choice`'s pick: given a bare table, the pair form `rulebook_of` keeps for that table, so the two
obvious lines (`table = kernel_map(coords)`, then each layer on `table`) build it once, at the first layer. The kernel map and its offset order are `neighbours`'; the exportable
modules are `exports`'; the fp64 ground truth is `reference`'.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch.utils.weak import WeakIdKeyDictionary

from weftlib.onnx_core.tracing import is_tracing

from . import pairs
from .footprint import grid_bytes
from .method_choice import auto_chunk_rows, choose_method
from .neighbours import check_coords, check_kernel_size
from .pairs import Rulebook

SPARSE_METHODS = ("im2col", "accumulate", "scatter")  # the sparse methods that export with static shapes
METHODS = ("dense", *SPARSE_METHODS, "compact")
AUTO = "auto"
DEFAULT_DENSE_BUDGET = 8 << 30  # bytes the dense method may allocate before it refuses


class DenseBudgetError(MemoryError):
    """The dense method would need more memory than its budget allows."""


# ----------------------------------------------------------------------------------------------- checks


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
    check_kernel_size(k)
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
    check_coords(coords)
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

    `weight` is in Conv3d layout [Cout, Cin, k, k, k]. `"auto"` (the default) runs `choose_method`'s pick:
    `"compact"` on the rulebook given, or on the one `rulebook_of` keeps for the table given (built at the
    first layer on that table, reused by every later one); under an exporter the one-GEMM `"im2col"`. The
    named methods stay for the memory study and the exports, and read the table alone. `"dense"` also needs `coords` and `res` and
    refuses (DenseBudgetError naming the bytes) when its grids exceed `budget_bytes`; `"im2col"` processes
    `chunk_rows` rows at a time when given (bounding its buffer to chunk_rows * k^3 * Cin); `"compact"` given
    a table builds its rulebook first, in chunks of `chunk_rows` voxels (auto-sized when None).
    """
    book, table = (nbr, nbr.table) if isinstance(nbr, Rulebook) else (None, nbr)
    _check_conv_args(feats, table, weight, bias, method, chunk_rows)
    if book is not None and method in (AUTO, "compact") and chunk_rows not in (None, book.chunk_rows):
        raise ValueError(f"chunk_rows={chunk_rows} differs from the rulebook's chunks of {book.chunk_rows} voxels")
    if method == AUTO:
        method = choose_method(feats.shape[0], table.shape[1], tracing=is_tracing(feats), has_rulebook=book is not None)
        if method == "compact" and book is None:
            book = rulebook_of(table, feats.shape[1], feats.element_size(), chunk_rows)
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


_KEPT: WeakIdKeyDictionary = WeakIdKeyDictionary()  # table -> (its version, its rulebook less the table)


def rulebook_of(nbr: torch.Tensor, channels: int = 64, itemsize: int = 4, chunk_rows: int | None = None) -> Rulebook:
    """The rulebook of table `nbr`, built on the first call for that table (`rulebook`, chunks sized for a
    layer of `channels` x `itemsize` bytes, or `chunk_rows`) and kept while the table lives, so every layer on
    one voxel set reuses one: what `"auto"` runs on when given a bare table. It is rebuilt when the table was
    modified in place since, or when `chunk_rows` names other chunks; it holds about 8 bytes a pair
    (`Rulebook.nbytes`) beside the table, freed with it."""
    kept = _KEPT.get(nbr)
    if kept is None or kept[0] != nbr._version or chunk_rows not in (None, kept[1].chunk_rows):
        book = rulebook(nbr, chunk_rows, channels, itemsize)
        kept = (nbr._version, dataclasses.replace(book, table=nbr.new_empty((0, nbr.shape[1]))))
        _KEPT[nbr] = kept  # kept without the table: a value that held its key would keep the key alive
    return dataclasses.replace(kept[1], table=nbr)


def rulebook_rows(n: int, taps: int, channels: int, itemsize: int, threads: int | None = None) -> int:
    """Voxels per rulebook chunk when the caller gives none: `auto_chunk_rows` shared by the `threads` (torch's
    count when None) that run a layer's chunks at once, each with its own buffers (`pairs.conv`), so their
    buffers together stay one chunk's; all of a small set."""
    rows = auto_chunk_rows("compact", taps, channels, itemsize, n)
    if rows is None:
        return max(n, 1)
    return max(64, rows // (torch.get_num_threads() if threads is None else max(threads, 1)))


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


def densify(feats: torch.Tensor, coords: torch.Tensor, res: int) -> torch.Tensor:
    """The host half of the densify route: features placed on a zero grid [1, C, res, res, res]."""
    check_coords(coords)
    x, y, z = coords.to(torch.int64).unbind(1)
    grid = feats.new_zeros((1, feats.shape[1], res, res, res))
    grid[0, :, x, y, z] = feats.t()
    return grid

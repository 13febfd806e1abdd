"""The kernel map: for each occupied voxel, the index of its neighbour at each kernel offset, or -1.

Every method of `conv`, the rulebook (`pairs`) and the memory study read this one table, so it is built in
one place, with the checks on what it accepts (voxel coordinates, a centred odd kernel), which `conv` and
the dense route reuse.

Offset order (shared by `kernel_map`, the weight layout and every method): offset `o` of a `k^3` kernel is
`(a, b, c)` with `o = a*k^2 + b*k + c`, neighbour `coord + (a - k//2, b - k//2, c - k//2)`; this is the
flattening of `torch.nn.Conv3d`'s weight `[Cout, Cin, k, k, k]` when the dense grid is indexed `[x, y, z]`.
"""

from __future__ import annotations

import torch

from .footprint import table_bytes
from .voxels import linear_keys


def kernel_map(coords: torch.Tensor, kernel_size: int = 3) -> torch.Tensor:
    """Neighbour table int64 [N, k^3]: row i, column o holds the index of voxel coords[i] + offset o, or -1.

    Sort + searchsorted on linearised keys, never a dense grid. Padded keys never wrap, so an offset is a
    constant key shift and the queries of a block of sorted keys are sorted too; one search per (dx, dy) finds
    the dz = 0 neighbour, and the others sit right next to that position in the sorted keys. Rows are filled in
    blocks, so the temporaries beyond the table are the keys, their order and one block (about 3 N int64).
    """
    check_coords(coords)
    check_kernel_size(kernel_size)
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


def check_kernel_size(kernel_size: int) -> None:
    """Refuse a kernel without a centre voxel (the offset order needs k odd)."""
    if not isinstance(kernel_size, int) or kernel_size < 1 or kernel_size % 2 == 0:
        raise ValueError(f"kernel_size must be a positive odd int (a centred kernel), got {kernel_size!r}")


def check_coords(coords: torch.Tensor) -> None:
    """Refuse anything but non-negative integer voxel coordinates [N, 3]."""
    if coords.ndim != 2 or coords.shape[1] != 3:
        raise ValueError(f"coords must be [N, 3], got {tuple(coords.shape)}")
    if coords.dtype.is_floating_point:
        raise ValueError(f"coords must be an integer tensor, got {coords.dtype}")
    if len(coords) and int(coords.min()) < 0:
        raise ValueError("coords must be non-negative voxel indices")

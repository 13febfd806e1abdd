"""Static index math of natten's neighborhood: which keys each query sees, computed in Python from sizes.

Every exportable formulation in `weftlib.attention` is built from these tables, so the ONNX graphs hold
them as constants (index tables, one-hot matrices, slice bounds) and never compute an index at run time.

natten 0.21's rule per axis (its Flex mask and C++ reference say the same): with dilation `d` the axis
splits into `d` interleaved groups (`i mod d`); group `g` holds `ceil((size - g) / d)` tokens, so groups
differ in length when `size` is not a multiple of `d`. Inside its group a query at position `p` sees the
`kernel` consecutive group positions starting at `clamp(p - kernel // 2, 0, length - kernel)`: the window
is shifted inward at the borders, never zero-padded. Even kernels are therefore asymmetric (left
`kernel // 2`, right `kernel // 2 - 1`). The 2-D neighborhood is the product of the two per-axis ones.
"""

from __future__ import annotations

from functools import lru_cache

import torch

Runs = tuple[tuple[int, int], ...]


@lru_cache(maxsize=256)
def axis_table(size: int, kernel: int, dilation: int) -> tuple[tuple[int, ...], ...]:
    """`table[i][a]`: the axis index of query `i`'s `a`-th neighbor (ascending), natten's clamped rule."""
    if kernel * dilation > size:
        raise ValueError(f"kernel {kernel} x dilation {dilation} exceeds the axis size {size}")
    table = []
    for i in range(size):
        group, pos = i % dilation, i // dilation
        length = (size - group + dilation - 1) // dilation
        start = min(max(pos - kernel // 2, 0), length - kernel)
        table.append(tuple(group + dilation * (start + a) for a in range(kernel)))
    return tuple(table)


def contiguous_runs(indices: tuple[int, ...]) -> Runs:
    """Split an index sequence into maximal runs of consecutive values: `(start, length)` per run.

    A shifted copy of an axis is then a Concat of static Slices, one per run; near a clamped border the
    same short slice repeats.
    """
    runs: list[tuple[int, int]] = []
    for j in indices:
        if runs and runs[-1][0] + runs[-1][1] == j:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((j, 1))
    return tuple(runs)


@lru_cache(maxsize=256)
def shift_runs(size: int, kernel: int, dilation: int) -> tuple[Runs, ...]:
    """Per kernel offset `a`: the runs that build `x[table[:, a]]` along one axis from static slices."""
    table = axis_table(size, kernel, dilation)
    return tuple(contiguous_runs(tuple(row[a] for row in table)) for a in range(kernel))


@lru_cache(maxsize=64)
def neighbor_index(shape: tuple[int, int], kernel: tuple[int, int],
                   dilation: tuple[int, int]) -> torch.Tensor:
    """`[H*W, kh*kw]` int64 table of flat key indices per flat query (row-major window order)."""
    rows = torch.tensor(axis_table(shape[0], kernel[0], dilation[0]), dtype=torch.int64)
    cols = torch.tensor(axis_table(shape[1], kernel[1], dilation[1]), dtype=torch.int64)
    flat = rows[:, None, :, None] * shape[1] + cols[None, :, None, :]  # [H, W, kh, kw]
    return flat.reshape(shape[0] * shape[1], kernel[0] * kernel[1])


@lru_cache(maxsize=16)
def neighbor_mask(shape: tuple[int, int], kernel: tuple[int, int],
                  dilation: tuple[int, int]) -> torch.Tensor:
    """`[H*W, H*W]` boolean: True where the key (column) is in the query's (row) neighborhood."""
    index = neighbor_index(shape, kernel, dilation)
    mask = torch.zeros(index.shape[0], index.shape[0], dtype=torch.bool)
    mask.scatter_(1, index, True)
    return mask


def default_tile(size: int, kernel: int, dilation: int) -> int:
    """Query rows per one-hot tile: about one window span, so each tile's input is ~2 tiles long."""
    return min(size, max(8, (kernel - 1) * dilation))


@lru_cache(maxsize=64)
def onehot_tiles(size: int, kernel: int, dilation: int,
                 tile: int | None = None) -> tuple[tuple[int, ...], int, torch.Tensor]:
    """Banded selection as small one-hot MatMuls: `(starts, span, onehot)`.

    Queries are cut into `n = ceil(size / tile)` tiles of `tile` rows. Tile `t` reads the `span` input rows
    from `starts[t]` (every key it needs lies there) and `onehot[t]` (`[tile * kernel, span]`, row
    `r * kernel + a`) picks neighbor `a` of its row `r`; rows past `size` in the last tile stay zero.
    Cost per output element is `span` multiply-adds instead of `size` for one full-axis one-hot matrix.
    """
    table = axis_table(size, kernel, dilation)
    tile = default_tile(size, kernel, dilation) if tile is None else tile
    if not 1 <= tile <= size:
        raise ValueError(f"tile must be in [1, {size}], got {tile}")
    n_tiles = -(-size // tile)
    lows, highs = [], []
    for t in range(n_tiles):
        rows = table[t * tile:(t + 1) * tile]
        lows.append(min(r[0] for r in rows))
        highs.append(max(r[-1] for r in rows))
    span = max(h - lo + 1 for lo, h in zip(lows, highs))
    starts = tuple(min(lo, size - span) for lo in lows)
    onehot = torch.zeros(n_tiles, tile * kernel, span)
    for i, row in enumerate(table):
        t, r = divmod(i, tile)
        for a, j in enumerate(row):
            onehot[t, r * kernel + a, j - starts[t]] = 1.0
    return starts, span, onehot

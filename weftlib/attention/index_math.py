"""Static index math of natten's neighborhood: which keys each query sees, computed in Python from sizes.

Every exportable formulation in `weftlib.attention` is built from these tables, so the ONNX graphs hold
them as constants (index tables, one-hot matrices, slice bounds) and never compute an index at run time.
They are built with Python and numpy, never torch ops, and the cached ones are kept and returned as numpy
arrays: the caller makes the tensor (`torch.from_numpy`, no copy) where it uses it. A tensor cached from a
call made while an exporter traces is a FakeTensor of that trace; handed to the next trace, it made one
export (02's matmul device layout at 128², after the benchmark had exported the same shape) take minutes
instead of seconds.

natten 0.21's rule per axis (its Flex mask and C++ reference say the same): with dilation `d` the axis
splits into `d` interleaved groups (`i mod d`); group `g` holds `ceil((size - g) / d)` tokens, so groups
differ in length when `size` is not a multiple of `d`. Inside its group a query at position `p` sees the
`kernel` consecutive group positions starting at `clamp(p - kernel // 2, 0, length - kernel)`: the window
is shifted inward at the borders, never zero-padded. Even kernels are therefore asymmetric (left
`kernel // 2`, right `kernel // 2 - 1`). The 2-D neighborhood is the product of the two per-axis ones.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

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


@lru_cache(maxsize=4)  # HW x kh*kw int64 each
def neighbor_index(shape: tuple[int, int], kernel: tuple[int, int], dilation: tuple[int, int]) -> np.ndarray:
    """`[H*W, kh*kw]` int64 table of flat key indices per flat query (row-major window order)."""
    rows = np.array(axis_table(shape[0], kernel[0], dilation[0]), dtype=np.int64)
    cols = np.array(axis_table(shape[1], kernel[1], dilation[1]), dtype=np.int64)
    flat = rows[:, None, :, None] * shape[1] + cols[None, :, None, :]  # [H, W, kh, kw]
    return flat.reshape(shape[0] * shape[1], kernel[0] * kernel[1])


@lru_cache(maxsize=2)  # (HW)^2 booleans each
def neighbor_mask(shape: tuple[int, int], kernel: tuple[int, int], dilation: tuple[int, int]) -> np.ndarray:
    """`[H*W, H*W]` boolean: True where the key (column) is in the query's (row) neighborhood."""
    index = neighbor_index(shape, kernel, dilation)
    mask = np.zeros((index.shape[0], index.shape[0]), dtype=bool)
    np.put_along_axis(mask, index, True, axis=1)
    return mask


def default_tile(size: int, kernel: int, dilation: int) -> int:
    """Query rows per one-hot tile: about one window span, so each tile's input is ~2 tiles long."""
    return min(size, max(8, (kernel - 1) * dilation))


@lru_cache(maxsize=64)
def onehot_tiles(
    size: int, kernel: int, dilation: int, tile: int | None = None
) -> tuple[tuple[int, ...], int, np.ndarray]:
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
        rows = table[t * tile : (t + 1) * tile]
        lows.append(min(r[0] for r in rows))
        highs.append(max(r[-1] for r in rows))
    span = max(h - lo + 1 for lo, h in zip(lows, highs))
    starts = tuple(min(lo, size - span) for lo in lows)
    onehot = np.zeros((n_tiles, tile * kernel, span), dtype=np.float32)
    for i, row in enumerate(table):
        t, r = divmod(i, tile)
        for a, j in enumerate(row):
            onehot[t, r * kernel + a, j - starts[t]] = 1.0
    return starts, span, onehot


@lru_cache(maxsize=64)
def halo_tiles(size: int, kernel: int, dilation: int, tile: int = 8) -> tuple[int, int, int, np.ndarray, np.ndarray]:
    """Query tiles with the key halo they need, per axis: `(padded, n_tiles, span, keys, allowed)`.

    The axis is zero-padded to `padded = dilation * n_tiles * tile` and viewed as `[group, tile index, row]`
    (original index `i = (t * tile + r) * dilation + g`), so every tile lies inside one dilation group and
    its keys form one contiguous run of group positions. `keys[g, t, s]` (`[dilation, n_tiles, span]`) is the
    original index of halo slot `s`; `allowed[g, t, r, s]` says whether row `r` attends to slot `s`. Slots
    past a short group point at index 0 and are never allowed; padded rows attend to slot 0 only, so
    their (discarded) softmax stays finite.
    """
    table = axis_table(size, kernel, dilation)
    longest = -(-size // dilation)
    tile = min(tile, longest)
    n_tiles = -(-longest // tile)
    ranges: dict[tuple[int, int], tuple[int, int]] = {}
    for i, row in enumerate(table):
        g, p = i % dilation, i // dilation
        lo, hi = ranges.get((g, p // tile), (row[0] // dilation, row[-1] // dilation))
        ranges[(g, p // tile)] = (min(lo, row[0] // dilation), max(hi, row[-1] // dilation))
    span = max(hi - lo + 1 for lo, hi in ranges.values())
    keys = np.zeros((dilation, n_tiles, span), dtype=np.int64)
    allowed = np.zeros((dilation, n_tiles, tile, span), dtype=bool)
    allowed[..., 0] = True  # padded rows; real rows are overwritten below
    for g in range(dilation):
        length = (size - g + dilation - 1) // dilation
        for t in range(n_tiles):
            start = max(0, min(ranges.get((g, t), (0, 0))[0], length - span))
            pos = start + np.arange(span)
            keys[g, t] = np.where(pos < length, g + dilation * pos, 0)
            for r in range(tile):
                p = t * tile + r
                if p < length:
                    allowed[g, t, r] = np.isin(g + dilation * pos, table[p * dilation + g]) & (pos < length)
    return dilation * n_tiles * tile, n_tiles, span, keys, allowed


@lru_cache(maxsize=4)  # the bias grows with HW x halo
def halo_plan(shape: tuple[int, int], kernel: tuple[int, int], dilation: tuple[int, int], tile: int = 8) -> dict:
    """Both axes of `halo_tiles` combined for 2-D tiles (order: row group, col group, row tile, col tile).

    `index` `[G * S]`: flat key index of each halo slot (S = span_r * span_c per tile); `bias` `[G, 1, T, S]`:
    0 where a tile row (T = tile_r * tile_c queries) attends to a slot, -inf elsewhere.
    """
    pr, nr, sr, keys_r, ok_r = halo_tiles(shape[0], kernel[0], dilation[0], tile)
    pc, nc, sc, keys_c, ok_c = halo_tiles(shape[1], kernel[1], dilation[1], tile)
    index = keys_r[:, None, :, None, :, None] * shape[1] + keys_c[None, :, None, :, None, :]
    ok = ok_r[:, None, :, None, :, None, :, None] & ok_c[None, :, None, :, None, :, None, :]
    groups = dilation[0] * dilation[1] * nr * nc
    bias = np.where(ok, np.float32(0.0), np.float32(-np.inf)).reshape(groups, 1, ok_r.shape[2] * ok_c.shape[2], sr * sc)
    return {
        "padded": (pr, pc),
        "tiles": (nr, nc),
        "tile": (ok_r.shape[2], ok_c.shape[2]),
        "index": np.ascontiguousarray(index.reshape(-1)),
        "bias": bias,
        "slots": sr * sc,
        "groups": groups,
    }

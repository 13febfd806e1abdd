"""The five exact formulations of natten's 2-D neighborhood attention, as plain static-shape torch code.

Inputs are already checked and normalised by `weftlib.attention`: q `[B, H, W, heads, D]`, k and v with the
same heads as q (GQA expanded), per-axis `kernel` and `dilation` tuples and a float `scale`. Each function
uses only ops that torch.onnx.export lowers to standard ONNX with constant indices; see each docstring for
the op budget it is built to respect.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from weftlib.onnx_core.tracing import is_tracing

from . import index_math

Pair = tuple[int, int]
MASKED_MAX_SCORES = 1 << 27  # elements of the dense [B, heads, HW, HW] score tensor (512 MiB in fp32)


def dims(x: Tensor) -> tuple[int, ...]:
    """Static sizes as Python ints (the legacy tracer hands out tensors), for the cached index math."""
    return tuple(int(n) for n in x.shape)


def shifted(x: Tensor, dim: int, runs: index_math.Runs) -> Tensor:
    """`x` re-indexed along `dim` by a static index sequence given as runs: Slices + one Concat."""
    pieces = {run: x.narrow(dim, run[0], run[1]) for run in dict.fromkeys(runs)}  # each distinct slice once
    parts = [pieces[run] for run in runs]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim)


def _softmax_scores(scores: Tensor, scale: float) -> Tensor:
    return torch.softmax(scores * scale, dim=-1)


# eager runs of gather/matmul/shift work in query bands whose temporaries stay about here; traced ones
# (`is_tracing`) keep the whole-map form, so exported graphs keep their shape
BAND_BYTES = 256 << 20


def band_rows(rows: int, bytes_per_row: int, budget: int | None = None) -> int:
    """Query rows per band so one band's temporaries (`bytes_per_row` each) stay within `budget`."""
    budget = BAND_BYTES if budget is None else budget
    return max(1, min(rows, budget // max(bytes_per_row, 1)))


@lru_cache(maxsize=2)  # up to 512 MiB each
def _mask_bias(shape: Pair, kernel: Pair, dilation: Pair) -> np.ndarray:
    """The additive mask as a ready constant, so the exported graph holds it as one initializer (numpy, like
    every cached constant here: see `index_math`)."""
    allowed = index_math.neighbor_mask(shape, kernel, dilation)
    return np.where(allowed, np.float32(0.0), np.float32(-np.inf))


def masked(q: Tensor, k: Tensor, v: Tensor, kernel: Pair, dilation: Pair, scale: float) -> Tensor:
    """Dense attention plus a constant additive mask (0 inside the neighborhood, -inf outside).

    The score tensor is `[B, heads, HW, HW]`: memory grows as (HW)^2, so large maps are refused.
    """
    b, h, w, heads, _ = dims(q)
    n = h * w
    if b * heads * n * n > MASKED_MAX_SCORES:
        raise ValueError(
            f"method='masked' holds a dense [B, heads, HW, HW] = [{b}, {heads}, {n}, {n}] score tensor "
            f"({b * heads * n * n * q.element_size() / 2**30:.2f} GiB), above its limit of "
            f"{MASKED_MAX_SCORES} elements; use 'shift' or 'gather' for maps this large"
        )
    bias = torch.from_numpy(_mask_bias((h, w), kernel, dilation)).to(device=q.device, dtype=q.dtype)
    qf, kf, vf = (t.reshape(b, n, heads, t.shape[-1]).transpose(1, 2) for t in (q, k, v))
    probs = torch.softmax(torch.matmul(qf, kf.transpose(-1, -2)) * scale + bias, dim=-1)
    out = torch.matmul(probs, vf)  # [B, heads, HW, Dv]
    return out.transpose(1, 2).reshape(b, h, w, heads, v.shape[-1])


def _window_attention(q: Tensor, k_win: Tensor, v_win: Tensor, scale: float) -> Tensor:
    """Attention of each query over its own `kk` gathered neighbors: k_win/v_win `[B, N, kk, heads, D]`."""
    b, h, w, heads, d = dims(q)
    qf = q.reshape(b, h * w, heads, 1, d)
    kt = k_win.permute(0, 1, 3, 4, 2)  # [B, N, heads, D, kk]
    probs = _softmax_scores(torch.matmul(qf, kt), scale)  # [B, N, heads, 1, kk]
    out = torch.matmul(probs, v_win.permute(0, 1, 3, 2, 4))  # [B, N, heads, 1, Dv]
    return out.reshape(b, h, w, heads, v_win.shape[-1])


def gather(q: Tensor, k: Tensor, v: Tensor, kernel: Pair, dilation: Pair, scale: float) -> Tensor:
    """Tiled: queries in tiles of up to 8 x 8 inside one dilation group (q zero-padded, then reshaped);
    one Gather per k and v with a constant table fetches each tile's key halo, and each tile attends to its
    halo by batched MatMul with a constant additive mask that keeps exactly the natten neighborhood.
    Memory ~ (halo / tile) x |k| instead of kh*kw x |k| for a per-query table; in eager mode the tiles run
    in bands (`_gather_banded`) so that is bounded too."""
    b, h, w, heads, d = dims(q)
    dv = dims(v)[-1]
    plan = index_math.halo_plan((h, w), kernel, dilation)
    per_group = plan["slots"] * heads * (d + 2 * dv + plan["tile"][0] * plan["tile"][1]) * 4 * b
    if not is_tracing(q) and per_group * plan["groups"] > BAND_BYTES:
        return _gather_banded(q, k, v, plan, dilation, scale)
    (ph, pw), (nr, nc), (tr, tc) = plan["padded"], plan["tiles"], plan["tile"]
    groups, slots = plan["groups"], plan["slots"]
    dh, dw = dilation
    if (ph, pw) != (h, w):
        q = torch.nn.functional.pad(q, (0, 0, 0, 0, 0, pw - w, 0, ph - h))
    order = (0, 3, 6, 1, 4, 7, 2, 5, 8)  # [b,nr,tr,dh,nc,tc,dw,heads,x] <-> [b,dh,dw,nr,nc,heads,tr,tc,x]
    q_tiles = q.reshape(b, nr, tr, dh, nc, tc, dw, heads, d).permute(order).reshape(b, groups, heads, tr * tc, d)
    index = torch.from_numpy(plan["index"]).to(q.device)
    k_halo, v_halo = (
        torch.index_select(t.reshape(b, h * w, heads, t.shape[-1]), 1, index)
        .reshape(b, groups, slots, heads, t.shape[-1])
        .transpose(2, 3)
        for t in (k, v)
    )
    bias = torch.from_numpy(plan["bias"]).to(device=q.device, dtype=q.dtype)
    scores = torch.matmul(q_tiles, k_halo.transpose(-1, -2)) * scale + bias
    out = torch.matmul(torch.softmax(scores, dim=-1), v_halo)  # [b, groups, heads, tr * tc, dv]
    out = out.reshape(b, dh, dw, nr, nc, heads, tr, tc, dv).permute(order).reshape(b, ph, pw, heads, dv)
    return out[:, :h, :w] if (ph, pw) != (h, w) else out


def _gather_banded(q: Tensor, k: Tensor, v: Tensor, plan: dict, dilation: Pair, scale: float) -> Tensor:
    """`gather` one row dilation group at a time (and within it, bands of its column groups): each band's
    tiles gather their halos, attend, and write their queries straight into the output (a strided view in
    tile order), so the extra memory is one band's halos and scores, not the whole map's."""
    b, h, w, heads, d = dims(q)
    dv = dims(v)[-1]
    (ph, pw), (nr, nc), (tr, tc) = plan["padded"], plan["tiles"], plan["tile"]
    slots = plan["slots"]
    dh, dw = dilation
    if (ph, pw) != (h, w):
        q = torch.nn.functional.pad(q, (0, 0, 0, 0, 0, pw - w, 0, ph - h))
    out = q.new_empty((b, ph, pw, heads, dv))
    order = (0, 3, 6, 1, 4, 7, 2, 5, 8)  # [b,nr,tr,dh,nc,tc,dw,heads,x] -> [b,dh,dw,nr,nc,heads,tr,tc,x]
    q_view = q.reshape(b, nr, tr, dh, nc, tc, dw, heads, d).permute(order)
    out_view = out.reshape(b, nr, tr, dh, nc, tc, dw, heads, dv).permute(order)
    k_flat, v_flat = (t.reshape(b, h * w, heads, t.shape[-1]) for t in (k, v))
    index = torch.from_numpy(plan["index"]).to(q.device).view(dh, dw, nr * nc * slots)
    bias = torch.from_numpy(plan["bias"]).to(device=q.device, dtype=q.dtype).view(dh, dw, nr * nc, 1, tr * tc, slots)
    per_col_group = nr * nc * slots * heads * (d + 2 * dv + tr * tc) * 4 * b
    step = band_rows(dw, per_col_group)
    for gh in range(dh):
        for g0 in range(0, dw, step):
            g1 = min(dw, g0 + step)
            n_g = (g1 - g0) * nr * nc
            idx = index[gh, g0:g1].reshape(-1)
            k_halo, v_halo = (
                torch.index_select(t, 1, idx).reshape(b, n_g, slots, heads, t.shape[-1]).transpose(2, 3)
                for t in (k_flat, v_flat)
            )
            q_tiles = q_view[:, gh, g0:g1].reshape(b, n_g, heads, tr * tc, d)
            scores = (
                torch.matmul(q_tiles, k_halo.transpose(-1, -2))
                .mul_(scale)
                .add_(bias[gh, g0:g1].reshape(n_g, 1, tr * tc, slots))
            )
            res = torch.matmul(torch.softmax(scores, dim=-1), v_halo)  # [b, n_g, heads, tr*tc, dv]
            out_view[:, gh, g0:g1].copy_(res.reshape(b, g1 - g0, nr, nc, heads, tr, tc, dv))
    return out[:, :h, :w] if (ph, pw) != (h, w) else out


def _select_axis(x: Tensor, size: int, kernel: int, dilation: int) -> Tensor:
    """x `[B, size, R]` -> `[B, size, kernel, R]`: each row's neighbors, by tiled constant one-hot MatMul."""
    starts, span, table = index_math.onehot_tiles(size, kernel, dilation)
    onehot = torch.from_numpy(table).to(device=x.device, dtype=x.dtype)
    tiles = [x.narrow(1, s, span) for s in starts]
    stacked = tiles[0].unsqueeze(1) if len(tiles) == 1 else torch.stack(tiles, 1)  # [B, n, span, R]
    picked = torch.matmul(onehot, stacked)  # [B, n, tile * kernel, R]
    n_rows = onehot.shape[0] * onehot.shape[1] // kernel
    return picked.reshape(x.shape[0], n_rows, kernel, x.shape[-1]).narrow(1, 0, size)


def _windows_matmul(x: Tensor, kernel: Pair, dilation: Pair) -> Tensor:
    """x `[B, H, W, heads, D]` -> `[B, H*W, kh*kw, heads, D]` without Gather (rows, then columns)."""
    b, h, w, heads, d = dims(x)
    rows = _select_axis(x.reshape(b, h, w * heads * d), h, kernel[0], dilation[0])
    rows = rows.reshape(b, h, kernel[0], w, heads, d).permute(0, 3, 1, 2, 4, 5)  # [B, W, H, kh, heads, D]
    cols = _select_axis(rows.reshape(b, w, h * kernel[0] * heads * d), w, kernel[1], dilation[1])
    cols = cols.reshape(b, w, kernel[1], h, kernel[0], heads, d).permute(0, 3, 1, 4, 2, 5, 6)
    return cols.reshape(b, h * w, kernel[0] * kernel[1], heads, d)


def matmul(q: Tensor, k: Tensor, v: Tensor, kernel: Pair, dilation: Pair, scale: float) -> Tensor:
    """Gather-free: the clamped window is separable per axis, so neighbor selection is a MatMul of
    constant one-hot tiles with k and v (rows, then columns); scores and output are batched MatMuls.
    Eager runs with large windows go through `_matmul_banded`: the same one-hot MatMul selection, applied
    to each query tile's scores and probabilities instead of to k and v, so no window is ever built."""
    b, h, w, heads, d = dims(q)
    window_bytes = b * h * w * kernel[0] * kernel[1] * heads * (d + dims(v)[-1]) * q.element_size()
    if not is_tracing(q) and window_bytes > BAND_BYTES:
        return _matmul_banded(q, k, v, kernel, dilation, scale)
    return _window_attention(q, _windows_matmul(k, kernel, dilation), _windows_matmul(v, kernel, dilation), scale)


@lru_cache(maxsize=64)
def _group_onehot(length: int, kernel: int, p0: int, p1: int) -> tuple[int, int, np.ndarray]:
    """Inside one dilation group of `length` tokens: `(lo, span, onehot)` where row `i * kernel + a` of
    onehot `[(p1 - p0) * kernel, span]` picks neighbor `a` of group position `p0 + i` from positions
    `lo .. lo + span` (natten's clamped window)."""
    starts = [min(max(p - kernel // 2, 0), length - kernel) for p in range(p0, p1)]
    lo, span = starts[0], starts[-1] + kernel - starts[0]
    onehot = np.zeros(((p1 - p0) * kernel, span), dtype=np.float32)
    for i, st in enumerate(starts):
        onehot[np.arange(kernel) + i * kernel, st - lo + np.arange(kernel)] = 1.0
    return lo, span, onehot


MATMUL_TILE = 8  # query tile side in group positions: the fastest of 4, 8 and 16 at NAF 512^2 (the benchmark)


def _axis_classes(size: int, dilation: int) -> list[tuple[int, int, int]]:
    """`(length, g0, g1)`: the dilation groups `g0 <= g < g1` of one axis that all hold `length` tokens
    (groups below `size % dilation` hold one more; natten's rule in `index_math`)."""
    longest, extra = -(-size // dilation), size % dilation
    return [(longest, 0, extra), (longest - 1, extra, dilation)] if extra else [(longest, 0, dilation)]


def _split_axis(x: Tensor, dim: int, dilation: int, length: int, g0: int, g1: int) -> Tensor:
    """A view (no copy) of `x` with axis `dim` split into `[length, g1 - g0]`: element `[.., p, j, ..]` is
    `x[.., p * dilation + g0 + j, ..]`, i.e. position `p` of dilation group `g0 + j`."""
    size, stride = list(x.shape), list(x.stride())
    size[dim : dim + 1] = [length, g1 - g0]
    stride[dim : dim + 1] = [dilation * stride[dim], stride[dim]]
    return x.as_strided(size, stride, x.storage_offset() + g0 * x.stride(dim))


def _tile_onehot(rows: tuple[int, int, int], cols: tuple[int, int, int], kernel: Pair) -> tuple[Pair, Pair, Tensor]:
    """One query tile's selection, rows `(length, p0, p1)` x cols of one dilation group: `((r0, sr), (c0,
    sc), onehot)` with onehot `[n, kh*kw, sr*sc]` (n = tile queries, row-major): row `a*kw + c` of query
    `(p, r)`'s matrix picks its neighbor `(a, c)` from the tile's key halo `[r0, r0+sr) x [c0, c0+sc)`."""
    r0, sr, sel_r = _group_onehot(rows[0], kernel[0], rows[1], rows[2])
    c0, sc, sel_c = _group_onehot(cols[0], kernel[1], cols[1], cols[2])
    tr, tc = rows[2] - rows[1], cols[2] - cols[1]
    onehot = sel_r.reshape(tr, 1, kernel[0], 1, sr, 1) * sel_c.reshape(1, tc, 1, kernel[1], 1, sc)
    return (r0, sr), (c0, sc), torch.from_numpy(onehot.reshape(tr * tc, kernel[0] * kernel[1], sr * sc))


def _matmul_banded(q: Tensor, k: Tensor, v: Tensor, kernel: Pair, dilation: Pair, scale: float) -> Tensor:
    """`matmul` in eager mode, without building any window: each query tile (`MATMUL_TILE`^2 positions of
    one dilation group, all groups of a band at once as the batch) scores its key halo (the contiguous
    group positions its windows cover, a strided view) by one MatMul; a constant one-hot MatMul then
    selects each query's kh*kw scores, and after the softmax its transpose spreads the probabilities back
    over the halo for one MatMul with the v halo. Selection is linear, so q.(S k) = (q k_halo^T) S^T and
    P.(S v) = (P S) v_halo: the neighbors are still chosen by one-hot MatMuls, never by Gather, index
    tables or masks, and the result is natten's (products with the one-hot's zeros and ones are exact).

    Why: building the windows S k and S v (every query's 81 keys and values at NAF's 512^2) by one-hot
    MatMuls moves every neighbour once per query, far more than the copy rate allows for. Here only the
    halos move (16 x 16 positions for an 8 x 8 tile at kernel 9), at the price of 256/81 times the score and
    output FLOPs plus the selection MatMuls, which the machine has to spare; it beats the time the no-reuse
    traffic alone would take, so that traffic is no bound (the lower bound is
    `geometry.Geometry.compulsory_bytes` and the FLOPs). The benchmark and docs/timings.md hold the times and
    peaks. Bands of row dilation groups keep one tile step's temporaries within `BAND_BYTES`."""
    b, h, w, heads, d = dims(q)
    dv = dims(v)[-1]
    (kh, kw), (dh, dw) = kernel, dilation
    out = q.new_empty((b, h, w, heads, dv))
    for rows in _axis_classes(h, dh):
        for cols in _axis_classes(w, dw):
            tr, tc = min(MATMUL_TILE, rows[0]), min(MATMUL_TILE, cols[0])
            halo = (tr + kh - 1) * (tc + kw - 1)  # the most keys one tile reads
            per_query = d + dv + 3 * halo + 2 * kh * kw  # q, output, scores, spread, result; picked, probs
            per_group = b * (cols[2] - cols[1]) * heads * (tr * tc * per_query + halo * (d + dv)) * q.element_size()
            # each [b, row position, row group, col position, col group, heads, channels]
            qg, kg, vg, og = (_split_axis(_split_axis(t, 1, dh, *rows), 3, dw, *cols) for t in (q, k, v, out))
            step = band_rows(rows[2] - rows[1], per_group)
            for g0 in range(0, rows[2] - rows[1], step):
                band = slice(g0, min(rows[2] - rows[1], g0 + step))
                for p0 in range(0, rows[0], tr):
                    for c0 in range(0, cols[0], tc):
                        p_rows, p_cols = (rows[0], p0, min(rows[0], p0 + tr)), (cols[0], c0, min(cols[0], c0 + tc))
                        _attend_tile(qg, kg, vg, og, band, p_rows, p_cols, kernel, scale)
    return out


def _attend_tile(
    qg: Tensor,
    kg: Tensor,
    vg: Tensor,
    og: Tensor,
    band: slice,
    rows: tuple[int, int, int],
    cols: tuple[int, int, int],
    kernel: Pair,
    scale: float,
) -> None:
    """One query tile of `_matmul_banded`, for every group of the band at once (they are the batch)."""
    (r0, sr), (c0, sc), onehot = _tile_onehot(rows, cols, kernel)
    onehot = onehot.to(device=qg.device, dtype=qg.dtype)
    query_pos, key_pos = (slice(rows[1], rows[2]), slice(cols[1], cols[2])), (slice(r0, r0 + sr), slice(c0, c0 + sc))

    def batched(t: Tensor, pos: tuple[slice, slice]) -> Tensor:  # -> [row groups * col groups * b * heads, n, c]
        part = t[:, pos[0], band, pos[1]]  # [b, tile rows, row groups, tile cols, col groups, heads, c]
        return part.permute(2, 4, 0, 5, 1, 3, 6).reshape(-1, part.shape[1] * part.shape[3], part.shape[-1])

    scores = torch.matmul(batched(qg, query_pos), batched(kg, key_pos).transpose(1, 2))  # [G, n, halo]
    picked = torch.matmul(scores.transpose(0, 1), onehot.transpose(1, 2))  # [n, G, kh*kw]: each query's own
    probs = _softmax_scores(picked, scale)
    spread = torch.matmul(probs, onehot)  # [n, G, halo]: zero outside the query's window
    res = torch.matmul(spread.transpose(0, 1), batched(vg, key_pos))  # [G, n, dv]
    part = og[:, query_pos[0], band, query_pos[1]]
    groups = (part.shape[2], part.shape[4], part.shape[0], part.shape[5])
    part.copy_(res.view(*groups, part.shape[1], part.shape[3], -1).permute(2, 4, 0, 5, 1, 3, 6))


def _offsets(x: Tensor, kernel: Pair, dilation: Pair) -> Iterator[Tensor]:
    """Yield `x` shifted for each kernel offset (row-major), built from static slices, one at a time."""
    _, h, w, _, _ = dims(x)
    row_runs = index_math.shift_runs(h, kernel[0], dilation[0])
    col_runs = index_math.shift_runs(w, kernel[1], dilation[1])
    for a in range(kernel[0]):
        x_a = shifted(x, 1, row_runs[a])
        for c in range(kernel[1]):
            yield shifted(x_a, 2, col_runs[c])


def shift(q: Tensor, k: Tensor, v: Tensor, kernel: Pair, dilation: Pair, scale: float) -> Tensor:
    """Per kernel offset: k and v shifted by static Slice/Concat, score = ReduceSum(q * k_shift);
    Softmax over the kh*kw scores; output = sum of p * v_shift. No Gather, no MatMul; only the
    `[B, H, W, heads, kh*kw]` scores are held beyond one shifted copy at a time. Eager runs go through
    `_shift_banded` (same arithmetic, bands of query rows, no shifted copies)."""
    if not is_tracing(q):
        return _shift_banded(q, k, v, kernel, dilation, scale)
    scores = torch.stack([(q * k_ab).sum(-1) for k_ab in _offsets(k, kernel, dilation)], dim=-1)
    probs = torch.split(_softmax_scores(scores, scale), 1, dim=-1)
    pairs = zip(probs, _offsets(v, kernel, dilation))
    p_0, v_0 = next(pairs)
    out = p_0 * v_0
    for p_ab, v_ab in pairs:
        out = out + p_ab * v_ab
    return out


def _pieces(table_column: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """`(dst, src, length)` runs: destinations dst..dst+length read sources src..src+length."""
    pieces, dst = [], 0
    for src, length in index_math.contiguous_runs(table_column):
        pieces.append((dst, src, length))
        dst += length
    return pieces


def _shift_banded(q: Tensor, k: Tensor, v: Tensor, kernel: Pair, dilation: Pair, scale: float) -> Tensor:
    """`shift` in eager mode: bands of query rows; per offset and per run of the shifted column index, the
    score and the output are accumulated on slices of q, k, v and the output (no shifted copies, the
    product added in place). Temporaries: one band's scores and one slice product. q, k and v are made
    contiguous first: NAF hands natten permuted views of its `[B, C, H, W]` images, and sliced products over
    the channel stride are much slower than a copy of each."""
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, h, w, heads, d = dims(q)
    dv = dims(v)[-1]
    kk = kernel[0] * kernel[1]
    rows_table = index_math.axis_table(h, kernel[0], dilation[0])
    cols_table = index_math.axis_table(w, kernel[1], dilation[1])
    col_pieces = [_pieces(tuple(row[c] for row in cols_table)) for c in range(kernel[1])]
    out = q.new_empty((b, h, w, heads, dv))
    per_row = b * w * heads * (kk + 2 * dv + d) * q.element_size()
    step = band_rows(h, per_row, BAND_BYTES // 4)  # smaller bands than this were much slower at NAF 512^2
    for r0 in range(0, h, step):
        r1 = min(h, r0 + step)
        row_pieces = [_pieces(tuple(rows_table[i][a] for i in range(r0, r1))) for a in range(kernel[0])]
        qb, ob = q[:, r0:r1], out[:, r0:r1]
        scores = q.new_empty((b, r1 - r0, w, heads, kk))
        for a, rp in enumerate(row_pieces):
            for c, cp in enumerate(col_pieces):
                o = a * kernel[1] + c
                for rd, rs, rl in rp:
                    for cd, cs, cl in cp:
                        torch.sum(
                            qb[:, rd : rd + rl, cd : cd + cl] * k[:, rs : rs + rl, cs : cs + cl],
                            dim=-1,
                            out=scores[:, rd : rd + rl, cd : cd + cl, :, o],
                        )
        probs = _softmax_scores(scores, scale)
        ob.zero_()
        for a, rp in enumerate(row_pieces):
            for c, cp in enumerate(col_pieces):
                o = a * kernel[1] + c
                for rd, rs, rl in rp:
                    for cd, cs, cl in cp:
                        ob[:, rd : rd + rl, cd : cd + cl].addcmul_(
                            probs[:, rd : rd + rl, cd : cd + cl, :, o : o + 1], v[:, rs : rs + rl, cs : cs + cl]
                        )
    return out


def lowres(q: Tensor, k: Tensor, v: Tensor, kernel: Pair, dilation: Pair, scale: float) -> Tensor:
    """NAF's case: k, v on an `[h, w]` grid with `H = h*dh`, `W = w*dw`, equal to natten on their nearest
    upsampling with dilation `(dh, dw)`. Each dilation group then holds exactly the low-res tokens, and all
    `dh x dw` queries of low-res cell `(p, r)` share one clamped window of low-res tokens. Windows come from
    static slices of the small grid; each cell's queries attend by batched MatMul."""
    b, hq, wq, heads, d = dims(q)
    _, h, w, _, dv = dims(v)
    dh, dw = dilation
    k_win = torch.stack(list(_offsets(k, kernel, (1, 1))), dim=-1)  # [B, h, w, heads, D, kk]
    v_win = torch.stack(list(_offsets(v, kernel, (1, 1))), dim=-2)  # [B, h, w, heads, kk, Dv]
    cells = q.reshape(b, h, dh, w, dw, heads, d).permute(0, 1, 3, 5, 2, 4, 6).reshape(b, h, w, heads, dh * dw, d)
    probs = _softmax_scores(torch.matmul(cells, k_win), scale)  # [B, h, w, heads, dh*dw, kk]
    out = torch.matmul(probs, v_win)
    out = out.reshape(b, h, w, heads, dh, dw, dv).permute(0, 1, 4, 2, 5, 3, 6)
    return out.reshape(b, hq, wq, heads, dv)


FORMULATIONS = {"masked": masked, "gather": gather, "matmul": matmul, "shift": shift, "lowres": lowres}

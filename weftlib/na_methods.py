"""The five exact formulations of natten's 2-D neighborhood attention, as plain static-shape torch code.

Inputs are already checked and normalised by `weftlib.attention`: q `[B, H, W, heads, D]`, k and v with the
same heads as q (GQA expanded), per-axis `kernel` and `dilation` tuples and a float `scale`. Each function
uses only ops that torch.onnx.export lowers to standard ONNX with constant indices; see each docstring for
the op budget it is built to respect.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from weftlib import na_index

Pair = tuple[int, int]
MASKED_MAX_SCORES = 1 << 27  # elements of the dense [B, heads, HW, HW] score tensor (512 MiB in fp32)


def dims(x: Tensor) -> tuple[int, ...]:
    """Static sizes as Python ints (the legacy tracer hands out tensors), for the cached index math."""
    return tuple(int(n) for n in x.shape)


def shifted(x: Tensor, dim: int, runs: na_index.Runs) -> Tensor:
    """`x` re-indexed along `dim` by a static index sequence given as runs: Slices + one Concat."""
    pieces = {run: x.narrow(dim, run[0], run[1]) for run in dict.fromkeys(runs)}  # each distinct slice once
    parts = [pieces[run] for run in runs]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim)


def _softmax_scores(scores: Tensor, scale: float) -> Tensor:
    return torch.softmax(scores * scale, dim=-1)


@lru_cache(maxsize=2)  # up to 512 MiB each
def _mask_bias(shape: Pair, kernel: Pair, dilation: Pair) -> Tensor:
    """The additive mask as a ready constant, so the exported graph holds it as one initializer."""
    allowed = na_index.neighbor_mask(shape, kernel, dilation).numpy()
    return torch.from_numpy(np.where(allowed, np.float32(0.0), np.float32(-np.inf)))


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
            f"{MASKED_MAX_SCORES} elements; use 'shift' or 'gather' for maps this large")
    bias = _mask_bias((h, w), kernel, dilation).to(device=q.device, dtype=q.dtype)
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
    Memory ~ (halo / tile) x |k| instead of kh*kw x |k| for a per-query table."""
    b, h, w, heads, d = dims(q)
    dv = dims(v)[-1]
    plan = na_index.halo_plan((h, w), kernel, dilation)
    (ph, pw), (nr, nc), (tr, tc) = plan["padded"], plan["tiles"], plan["tile"]
    groups, slots = plan["groups"], plan["slots"]
    dh, dw = dilation
    if (ph, pw) != (h, w):
        q = torch.nn.functional.pad(q, (0, 0, 0, 0, 0, pw - w, 0, ph - h))
    order = (0, 3, 6, 1, 4, 7, 2, 5, 8)  # [b,nr,tr,dh,nc,tc,dw,heads,x] <-> [b,dh,dw,nr,nc,heads,tr,tc,x]
    q_tiles = q.reshape(b, nr, tr, dh, nc, tc, dw, heads, d).permute(order).reshape(b, groups, heads, tr * tc, d)
    index = plan["index"].to(q.device)
    k_halo, v_halo = (torch.index_select(t.reshape(b, h * w, heads, t.shape[-1]), 1, index)
                      .reshape(b, groups, slots, heads, t.shape[-1]).transpose(2, 3) for t in (k, v))
    bias = plan["bias"].to(device=q.device, dtype=q.dtype)
    scores = torch.matmul(q_tiles, k_halo.transpose(-1, -2)) * scale + bias
    out = torch.matmul(torch.softmax(scores, dim=-1), v_halo)  # [b, groups, heads, tr * tc, dv]
    out = out.reshape(b, dh, dw, nr, nc, heads, tr, tc, dv).permute(order).reshape(b, ph, pw, heads, dv)
    return out[:, :h, :w] if (ph, pw) != (h, w) else out


def _select_axis(x: Tensor, size: int, kernel: int, dilation: int) -> Tensor:
    """x `[B, size, R]` -> `[B, size, kernel, R]`: each row's neighbors, by tiled constant one-hot MatMul."""
    starts, span, onehot = na_index.onehot_tiles(size, kernel, dilation)
    onehot = onehot.to(device=x.device, dtype=x.dtype)
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
    constant one-hot tiles with k and v (rows, then columns); scores and output are batched MatMuls."""
    return _window_attention(q, _windows_matmul(k, kernel, dilation), _windows_matmul(v, kernel, dilation),
                             scale)


def _offsets(x: Tensor, kernel: Pair, dilation: Pair):
    """Yield `x` shifted for each kernel offset (row-major), built from static slices, one at a time."""
    _, h, w, _, _ = dims(x)
    row_runs = na_index.shift_runs(h, kernel[0], dilation[0])
    col_runs = na_index.shift_runs(w, kernel[1], dilation[1])
    for a in range(kernel[0]):
        x_a = shifted(x, 1, row_runs[a])
        for c in range(kernel[1]):
            yield shifted(x_a, 2, col_runs[c])


def shift(q: Tensor, k: Tensor, v: Tensor, kernel: Pair, dilation: Pair, scale: float) -> Tensor:
    """Per kernel offset: k and v shifted by static Slice/Concat, score = ReduceSum(q * k_shift);
    Softmax over the kh*kw scores; output = sum of p * v_shift. No Gather, no MatMul; only the
    `[B, H, W, heads, kh*kw]` scores are held beyond one shifted copy at a time."""
    scores = torch.stack([(q * k_ab).sum(-1) for k_ab in _offsets(k, kernel, dilation)], dim=-1)
    probs = torch.split(_softmax_scores(scores, scale), 1, dim=-1)
    out = None
    for p_ab, v_ab in zip(probs, _offsets(v, kernel, dilation)):
        out = p_ab * v_ab if out is None else out + p_ab * v_ab
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

"""Real natten as the reference: `natten.functional.na2d` itself, run on CPU for any head dims.

Every formulation is proven against natten, never against another formulation of ours. On CPU natten runs
its Flex backend, which takes only equal power-of-two head dims, so `natten_reference` reaches it by exact
rewrites (zero padding, v in chunks); `_real_natten_na2d` finds natten's own function even while `swap`
or `naf` has rebound it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from .neighborhood import check_args


def _real_natten_na2d() -> Any:
    """natten.functional.na2d as installed, even inside `swap_natten` (the swap keeps the original)."""
    import natten.functional

    fn = natten.functional.na2d
    while hasattr(fn, "_weftlib_original"):
        fn = fn._weftlib_original
    return fn


def _pad_last(x: Tensor, size: int) -> Tensor:
    return x if x.shape[-1] == size else torch.nn.functional.pad(x, (0, size - x.shape[-1]))


def natten_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    scale: float | None = None,
) -> Tensor:
    """Real natten (its Flex backend on CPU) for any q/k and v head dims, by exact rewrites.

    Flex needs equal q/k/v head dims that are powers of two in [8, 512]. Zero-padding q and k to such a dim
    leaves every dot product unchanged (the scale is passed explicitly), and v is zero-padded and cut into
    chunks of that dim, stacked along the batch: attention weights do not depend on v, so each chunk's
    output is the matching slice of the full output.
    """
    check_args(q, k, v, kernel_size, dilation, "shift", scale)
    d = q.shape[-1]
    dp = 1 << max(3, math.ceil(math.log2(d)))
    if dp > 512:
        raise ValueError(f"natten's Flex backend takes head dims up to 512, got query head dim {d}.")
    scale_ = float(scale or d**-0.5)
    dv = v.shape[-1]
    chunks = -(-dv // dp)
    qp, kp = _pad_last(q, dp), _pad_last(k, dp)
    vp = _pad_last(v, chunks * dp)
    b, h, w, heads_kv, _ = v.shape
    v_stack = (
        vp.reshape(b, h, w, heads_kv, chunks, dp).permute(4, 0, 1, 2, 3, 5).reshape(chunks * b, h, w, heads_kv, dp)
    )
    q_stack, k_stack = (t.repeat(chunks, 1, 1, 1, 1) for t in (qp, kp))
    out = _real_natten_na2d()(q_stack, k_stack, v_stack, kernel_size=kernel_size, dilation=dilation, scale=scale_)
    out = out.reshape(chunks, b, h, w, q.shape[3], dp).permute(1, 2, 3, 4, 0, 5)
    return out.reshape(b, h, w, q.shape[3], chunks * dp)[..., :dv]

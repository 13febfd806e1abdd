"""STAND-IN for NAF's parameter-free cross-attention (src/layers/attentions.py upstream).

`natten` is imported as a module and `natten.na2d` looked up at call time, so a caller that reroutes
`natten.na2d` (weftlib.attention.swap_natten) reaches this exact call. Keys and values are brought to the
query grid by index-based nearest upsampling ("nearest-exact", which the exporter writes as GatherND).
"""

from __future__ import annotations

import natten
import torch
import torch.nn.functional as F
from torch import nn


def heads_last(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[B, heads*D, H, W] -> [B, H, W, heads, D], the layout natten.na2d takes."""
    b, c, h, w = x.shape
    return x.reshape(b, heads, c // heads, h, w).permute(0, 3, 4, 1, 2)


def channels_first(x: torch.Tensor) -> torch.Tensor:
    """[B, H, W, heads, D] -> [B, heads*D, H, W]."""
    b, h, w, n, d = x.shape
    return x.permute(0, 3, 4, 1, 2).reshape(b, n * d, h, w)


class CrossAttention(nn.Module):
    """Queries on the fine grid attend to a dilated neighbourhood of the coarse keys/values.

    Keys and values are nearest-upsampled to the query grid; the dilation is the resolution ratio, so each
    neighbourhood samples distinct coarse cells. No parameters: what it computes is fixed by its inputs.
    """

    def __init__(self, num_heads: int = 4, kernel_size: tuple[int, int] = (9, 9)) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.kernel_size = kernel_size

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, image: torch.Tensor | None = None):
        hq, wq = q.shape[-2:]
        hk, wk = k.shape[-2:]
        dilation = (hq // hk, wq // wk)
        q = heads_last(q, self.num_heads)
        k, v = (heads_last(F.interpolate(t, size=(hq, wq), mode="nearest-exact"), self.num_heads) for t in (k, v))
        out = natten.na2d(q, k, v, kernel_size=self.kernel_size, dilation=dilation, stride=1, backend="cutlass-fna")
        return channels_first(out)

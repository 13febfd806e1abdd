"""STAND-IN for NAF's parameter-free cross-attention (src/layers/attentions.py upstream).

`natten` is imported as a module and `natten.na2d` looked up at call time, so a caller that reroutes
`natten.na2d` (weftlib.attention.swap_natten) reaches this exact call.
"""

from __future__ import annotations

import natten
import torch
import torch.nn.functional as F
from torch import nn


def heads_last(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[B, heads*D, H, W] -> [B, H, W, heads, D], the layout natten.na2d takes."""
    b, c, h, w = x.shape
    return x.reshape(b, heads, c // heads, h, w).permute(0, 3, 4, 1, 2).contiguous()


def channels_first(x: torch.Tensor) -> torch.Tensor:
    """[B, H, W, heads, D] -> [B, heads*D, H, W]."""
    b, h, w, n, d = x.shape
    return x.permute(0, 3, 4, 1, 2).reshape(b, n * d, h, w)


class NeighborhoodCrossAttention(nn.Module):
    """Queries on the fine grid attend to a 9x9 dilated neighbourhood of the coarse keys/values.

    Keys and values are nearest-resized to the query grid; the dilation is the resolution ratio, so each
    neighbourhood samples distinct coarse cells. No parameters: what it computes is fixed by its inputs.
    """

    def __init__(self, heads: int = 4, kernel_size: tuple[int, int] = (9, 9)) -> None:
        super().__init__()
        self.heads = heads
        self.kernel_size = kernel_size

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        hq, wq = q.shape[-2:]
        hk, wk = k.shape[-2:]
        dilation = (hq // hk, wq // wk)
        q = heads_last(q, self.heads)
        k = heads_last(F.interpolate(k, size=(hq, wq), mode="nearest"), self.heads)
        v = heads_last(F.interpolate(v, size=(hq, wq), mode="nearest"), self.heads)
        out = natten.na2d(q, k, v, kernel_size=self.kernel_size, dilation=dilation, stride=1, backend="cutlass-fna")
        return channels_first(out)

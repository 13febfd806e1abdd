"""STAND-IN for NAF's axial rotary embedding (src/layers/rope.py upstream, DINOv3's RoPE).

Per head of D channels, a pixel's normalised (row, column) position in [-1, 1] turns each pair (i, i + D/2)
by an angle: the first D/4 frequencies follow the row, the next D/4 the column. The angles are computed in
the forward from the cached positions and the `periods` buffer (so at NAF's sizes, where the exporter does
not fold tables that large, Tile, Cos and Sin stay in the graph), the rotation pairs the two halves with a
negation (Neg), and the heads are split off the channel axis for it and merged back (Reshape, Transpose).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class RoPE(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, base: float = 100.0) -> None:
        super().__init__()
        if embed_dim % (4 * num_heads):
            raise ValueError(f"embed_dim {embed_dim} must be a multiple of 4 x num_heads ({num_heads})")
        self.num_heads, self.D_head = num_heads, embed_dim // num_heads
        quarter = self.D_head // 4
        self.register_buffer("periods", base ** (torch.arange(quarter, dtype=torch.float32) / quarter))
        self._positions: tuple[tuple[int, int], torch.Tensor] | None = None

    def create_coordinate(self, *, H: int, W: int) -> torch.Tensor:
        """[H*W, 2]: each pixel's centre, row and column scaled to [-1, 1] separately."""
        rows = (torch.arange(H, dtype=torch.float32) + 0.5) / H
        cols = (torch.arange(W, dtype=torch.float32) + 0.5) / W
        grid = torch.stack(torch.meshgrid(rows, cols, indexing="ij"), -1).reshape(H * W, 2)
        return grid * 2 - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        if self._positions is None or self._positions[0] != (h, w):
            self._positions = ((h, w), self.create_coordinate(H=h, W=w))
        pos = self._positions[1]
        angles = (2 * math.pi * pos[:, :, None] / self.periods).flatten(1).tile(2)  # [HW, D]
        tokens = x.reshape(b, self.num_heads, self.D_head, h * w).transpose(2, 3)  # [B, n, HW, D]
        first, second = tokens.chunk(2, dim=-1)
        turned = tokens * torch.cos(angles) + torch.cat([-second, first], -1) * torch.sin(angles)
        return turned.transpose(2, 3).reshape(b, c, h, w)

"""STAND-IN for NAF's upsampler (src/model/naf.py upstream), with random seeded weights.

Queries come from the image at the output resolution, keys from the low-resolution features, values are the
low-resolution features themselves split over the heads (so the value head dim is C/heads, not qk_dim).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from naf_standin.attentions import NeighborhoodCrossAttention


class NAFStandIn(nn.Module):
    """Image-guided feature upsampler: forward(image, lr_feats, output_size) -> [B, C, *output_size]."""

    def __init__(self, channels: int = 64, qk_dim: int = 64, heads: int = 4, kernel_size: int = 9,
                 seed: int = 0) -> None:
        super().__init__()
        if channels % heads:
            raise ValueError(f"channels: {channels} must split evenly over {heads} heads")
        self.channels, self.qk_dim, self.heads = channels, qk_dim, heads
        with torch.random.fork_rng(devices=[]):  # seeded weights without touching the caller's RNG
            torch.manual_seed(seed)
            self.query_encoder = nn.Sequential(
                nn.Conv2d(3, heads * qk_dim, 3, padding=1), nn.GELU(), nn.Conv2d(heads * qk_dim, heads * qk_dim, 1)
            )
            self.key_encoder = nn.Conv2d(channels, heads * qk_dim, 1)
        self.upsampler = NeighborhoodCrossAttention(heads=heads, kernel_size=(kernel_size, kernel_size))

    def check_inputs(self, image: torch.Tensor, lr_feats: torch.Tensor, output_size: tuple[int, int]) -> None:
        """Name the argument that does not fit, before any compute."""
        if image.dim() != 4 or image.shape[1] != 3:
            raise ValueError(f"image: expected [B, 3, H, W], got {tuple(image.shape)}")
        if lr_feats.dim() != 4 or lr_feats.shape[1] != self.channels:
            raise ValueError(f"lr_feats: expected [B, {self.channels}, h, w], got {tuple(lr_feats.shape)}")
        if any(o % s for o, s in zip(output_size, lr_feats.shape[-2:])):
            raise ValueError(f"output_size: {tuple(output_size)} is not a multiple of the feature grid "
                             f"{tuple(lr_feats.shape[-2:])}")

    def forward(self, image: torch.Tensor, lr_feats: torch.Tensor, output_size: tuple[int, int]) -> torch.Tensor:
        self.check_inputs(image, lr_feats, output_size)
        guide = F.interpolate(image, size=tuple(output_size), mode="bilinear", align_corners=False)
        queries = self.query_encoder(guide)
        keys = self.key_encoder(lr_feats)
        return self.upsampler(queries, keys, lr_feats)

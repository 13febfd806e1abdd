"""STAND-IN for NAF's upsampler (src/model/naf.py upstream), with random seeded weights.

Queries are the image encoded at the output resolution with a rotary embedding; keys are the same encoding
average-pooled to the feature grid; values are the low-resolution features themselves, split over the heads
(so the value head dim is C/heads, not dim/heads, and any feature width C is taken). The submodules carry
the upstream names (image_encoder.encoder, .sem_encoder, .rope, key_encoder, upsampler), so an exported
node's origin reads the same in both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from naf_standin.attentions import CrossAttention
from naf_standin.encoders import branch
from naf_standin.rope import RoPE


class ImageEncoder(nn.Module):
    """Two branches (1x1 and 3x3 kernels), each dim/2 wide, concatenated, pooled to the output size, then
    the rotary embedding."""

    def __init__(self, dim: int, heads_rope: int, layers: int, rope_base: float) -> None:
        super().__init__()
        self.encoder = branch(3, dim // 2, 1, layers)
        self.sem_encoder = branch(3, dim // 2, 3, layers)
        self.rope = RoPE(dim, heads_rope, rope_base)

    def forward(self, image: torch.Tensor, output_size: tuple[int, int]) -> torch.Tensor:
        x = torch.cat([self.encoder(image), self.sem_encoder(image)], dim=1)
        return self.rope(F.adaptive_avg_pool2d(x, output_size))


class KeyEncoder(nn.Module):
    def forward(self, x: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(x, features.shape[-2:])


class NAFStandIn(nn.Module):
    """Image-guided feature upsampler: forward(image, features, output_size) -> [B, C, *output_size]."""

    def __init__(self, dim: int = 256, heads_attn: int = 4, heads_rope: int = 4, kernel_size: int = 9,
                 img_layers: int = 2, rope_base: float = 100.0, seed: int = 0) -> None:
        super().__init__()
        if dim % heads_attn or dim % 16:
            raise ValueError(f"dim: {dim} must split evenly over {heads_attn} heads and 2 branches of 8 groups")
        self.dim, self.heads = dim, heads_attn
        with torch.random.fork_rng(devices=[]):  # seeded weights without touching the caller's RNG
            torch.manual_seed(seed)
            self.image_encoder = ImageEncoder(dim, heads_rope, img_layers, rope_base)
        self.query_encoder = nn.Identity()
        self.key_encoder = KeyEncoder()
        self.upsampler = CrossAttention(num_heads=heads_attn, kernel_size=(kernel_size, kernel_size))

    def check_inputs(self, image: torch.Tensor, features: torch.Tensor, output_size: tuple[int, int]) -> None:
        """Name the argument that does not fit, before any compute."""
        if image.dim() != 4 or image.shape[1] != 3:
            raise ValueError(f"image: expected [B, 3, H, W], got {tuple(image.shape)}")
        if features.dim() != 4 or features.shape[1] % self.heads:
            raise ValueError(f"features: expected [B, C, h, w] with C a multiple of {self.heads}, "
                             f"got {tuple(features.shape)}")
        if any(o % s for o, s in zip(output_size, features.shape[-2:])):
            raise ValueError(f"output_size: {tuple(output_size)} is not a multiple of the feature grid "
                             f"{tuple(features.shape[-2:])}")

    def forward(self, image: torch.Tensor, features: torch.Tensor, output_size: tuple[int, int]) -> torch.Tensor:
        self.check_inputs(image, features, output_size)
        x = self.image_encoder(image, output_size=tuple(output_size))
        queries = self.query_encoder(x)
        keys = self.key_encoder(x, features)
        return self.upsampler(queries, keys, features, image)

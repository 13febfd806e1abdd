"""STAND-IN for NAF's image encoder blocks (src/layers/convolutions.py upstream): convolutions with reflect
padding, GroupNorm and SiLU, so the exported graph carries the op families the real encoder brings (Pad,
Conv, InstanceNormalization and CastLike from the exporter's GroupNorm, Sigmoid and Mul)."""

from __future__ import annotations

import torch
from torch import nn


def conv(cin: int, cout: int, kernel: int) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel, padding=kernel // 2, padding_mode="reflect")


class NormActConv(nn.Module):
    """GroupNorm -> SiLU -> conv, twice; no residual (NAF's encoder block as configured)."""

    def __init__(self, channels: int, kernel: int, groups: int = 8) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, channels)
        self.conv1 = conv(channels, channels, kernel)
        self.norm2 = nn.GroupNorm(groups, channels)
        self.conv2 = conv(channels, channels, kernel)
        self.activation_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(self.activation_fn(self.norm1(x)))
        return self.conv2(self.activation_fn(self.norm2(x)))


def branch(cin: int, width: int, kernel: int, layers: int) -> nn.Sequential:
    """A stem conv from the image, then `layers` blocks, all with the same kernel."""
    return nn.Sequential(conv(cin, width, kernel), *[NormActConv(width, kernel) for _ in range(layers)])
